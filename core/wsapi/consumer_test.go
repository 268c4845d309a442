package wsapi

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConsumerMessageEncode(t *testing.T) {
	t.Parallel()
	cet := time.FixedZone("CET", 3600)
	pub := time.Date(2018, 11, 26, 14, 22, 59, 840_000_000, cet)
	tests := map[string]struct {
		msg  ConsumerMessage
		want string
	}{
		"minimal: properties and redeliveryCount always present": {
			msg:  ConsumerMessage{MessageID: "CAMQADAA", Payload: []byte("Hello World"), PublishTime: pub},
			want: `{"messageId":"CAMQADAA","payload":"SGVsbG8gV29ybGQ=","properties":{},"publishTime":"2018-11-26T14:22:59.84+01:00","redeliveryCount":0}`,
		},
		"all fields": {
			msg: ConsumerMessage{
				MessageID:       "CAEQAiAAMAE=",
				Payload:         []byte{},
				Properties:      map[string]string{"b": "2", "a": "1"},
				PublishTime:     time.Date(2024, 6, 19, 8, 0, 0, 0, time.UTC),
				RedeliveryCount: 3,
				EventTime:       time.Date(2021, 10, 29, 16, 1, 38, 967_000_000, time.FixedZone("", -7*3600)),
				Key:             ptr("k<&>"),
			},
			want: `{"messageId":"CAEQAiAAMAE=","payload":"","properties":{"a":"1","b":"2"},"publishTime":"2024-06-19T08:00:00Z","redeliveryCount":3,"eventTime":"2021-10-29T16:01:38.967-07:00","key":"k<&>"}`,
		},
		"empty key is written": {
			msg:  ConsumerMessage{MessageID: "x", PublishTime: time.Unix(0, 0).UTC(), Key: ptr("")},
			want: `{"messageId":"x","payload":"","properties":{},"publishTime":"1970-01-01T00:00:00Z","redeliveryCount":0,"key":""}`,
		},
		"encryption context": {
			msg: ConsumerMessage{
				MessageID:   "x",
				Payload:     []byte{1},
				PublishTime: time.Unix(1, 500_000).UTC(),
				EncryptionContext: &EncryptionContext{
					Keys:                    map[string]EncryptionKey{"my-key": {KeyValue: []byte{1, 2, 3}, Metadata: map[string]string{"m": "v"}}},
					Param:                   []byte{9, 9},
					CompressionType:         CompressionNone,
					UncompressedMessageSize: 1,
				},
			},
			want: `{"messageId":"x","payload":"AQ==","properties":{},"publishTime":"1970-01-01T00:00:01.0005Z","redeliveryCount":0,` +
				`"encryptionContext":{"keys":{"my-key":{"keyValue":"AQID","metadata":{"m":"v"}}},"param":"CQk=","compressionType":"NONE","uncompressedMessageSize":1,"batchSize":null,"encrypted":true}}`,
		},
		"encryption context with algorithm and batch size": {
			msg: ConsumerMessage{
				MessageID:   "x",
				PublishTime: time.Unix(0, 0).UTC(),
				EncryptionContext: &EncryptionContext{
					Keys:            map[string]EncryptionKey{"k": {}},
					Algorithm:       "RSA",
					CompressionType: CompressionLZ4,
					BatchSize:       ptr(int32(5)),
				},
			},
			want: `{"messageId":"x","payload":"","properties":{},"publishTime":"1970-01-01T00:00:00Z","redeliveryCount":0,` +
				`"encryptionContext":{"keys":{"k":{"metadata":{}}},"algorithm":"RSA","compressionType":"LZ4","uncompressedMessageSize":0,"batchSize":5,"encrypted":true}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := tc.msg.Encode()
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("Encode() (-got +want):\n%s", diff)
			}
			if !jsonValid(got) {
				t.Errorf("Encode() is not valid JSON: %s", got)
			}
		})
	}
}

func TestEndOfTopicResponse(t *testing.T) {
	t.Parallel()
	for reached, want := range map[bool]string{true: `{"endOfTopic":true}`, false: `{"endOfTopic":false}`} {
		if got := string(EndOfTopicResponse(reached)); got != want {
			t.Errorf("EndOfTopicResponse(%v) = %s, want %s", reached, got, want)
		}
	}
}

var plainMessageID = NewMessageID(3, 0)

var consumerCommandTests = map[string]struct {
	frame string
	want  ConsumerCommand
}{
	"ack without type": {
		frame: `{"messageId":"CAMQADAA"}`,
		want:  ConsumerCommand{Type: CommandAck, MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"unknown type is an ack": {
		frame: `{"type":"acknowledge","messageId":"CAMQADAA"}`,
		want:  ConsumerCommand{Type: CommandAck, TypeName: "acknowledge", MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"case matters": {
		frame: `{"type":"Permit","messageId":"CAMQADAA"}`,
		want:  ConsumerCommand{Type: CommandAck, TypeName: "Permit", MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"ack with unpadded id kept exactly": {
		frame: `{"messageId":"CAAQAw"}`,
		want:  ConsumerCommand{Type: CommandAck, MessageID: "CAAQAw", ID: MessageID{EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1}},
	},
	"ackType ignored": {
		frame: `{"messageId":"CAMQADAA","ackType":"cumulative"}`,
		want:  ConsumerCommand{Type: CommandAck, MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"ackType of any shape ignored": { // Pulsar's ConsumerCommand has no such field
		frame: `{"messageId":"CAMQADAA","ackType":{"x":1}}`,
		want:  ConsumerCommand{Type: CommandAck, MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"negative ack": {
		frame: `{"type":"negativeAcknowledge","messageId":"CAMQADAA"}`,
		want:  ConsumerCommand{Type: CommandNegativeAck, TypeName: "negativeAcknowledge", MessageID: "CAMQADAA", ID: plainMessageID},
	},
	"permit": {
		frame: `{"type":"permit","permitMessages":10}`,
		want:  ConsumerCommand{Type: CommandPermit, TypeName: "permit", PermitMessages: 10},
	},
	"permit string and negative": {
		frame: `{"type":"permit","permitMessages":"-2"}`,
		want:  ConsumerCommand{Type: CommandPermit, TypeName: "permit", PermitMessages: -2},
	},
	"permit zero": {
		frame: `{"type":"permit","permitMessages":0,"messageId":"garbage"}`,
		want:  ConsumerCommand{Type: CommandPermit, TypeName: "permit"},
	},
	"isEndOfTopic": {
		frame: `{"type":"isEndOfTopic"}`,
		want:  ConsumerCommand{Type: CommandIsEndOfTopic, TypeName: "isEndOfTopic"},
	},
	"unsubscribe": {
		frame: `{"type":"unsubscribe"} trailing`,
		want:  ConsumerCommand{Type: CommandUnsubscribe, TypeName: "unsubscribe"},
	},
	"repeated type, the last kept": {
		frame: `{"type":"bogus","type":"isEndOfTopic"}`,
		want:  ConsumerCommand{Type: CommandIsEndOfTopic, TypeName: "isEndOfTopic"},
	},
}

func TestDecodeConsumerCommand(t *testing.T) {
	t.Parallel()
	tests := consumerCommandTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeConsumerCommand([]byte(tc.frame))
			if err != nil {
				t.Fatalf("DecodeConsumerCommand(%s): %v", tc.frame, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("DecodeConsumerCommand(%s) (-got +want):\n%s", tc.frame, diff)
			}
		})
	}
}

var consumerCommandErrorTests = map[string]struct {
	frame     string
	wantClose int
	wantIs    error
}{
	"bad json":                 {frame: `{"messageId":`, wantClose: CloseFailedToDeserializeFromJSON},
	"empty":                    {frame: ``, wantClose: CloseFailedToDeserializeFromJSON},
	"array":                    {frame: `[]`, wantClose: CloseFailedToDeserializeFromJSON},
	"object type":              {frame: `{"type":{}}`, wantClose: CloseFailedToDeserializeFromJSON},
	"object type replaced":     {frame: `{"type":{},"type":"isEndOfTopic"}`, wantClose: CloseFailedToDeserializeFromJSON},
	"array messageId replaced": {frame: `{"messageId":[],"messageId":"CAMQADAA"}`, wantClose: CloseFailedToDeserializeFromJSON},
	"an earlier bad value replaced after a refusal": {
		frame: `{"permitMessages":"abc","messageId":{},"messageId":"x","permitMessages":1,"type":"permit"}`, wantClose: CloseFailedToDeserializeFromJSON,
	},
	"permitMessages not a num": {frame: `{"type":"permit","permitMessages":"x"}`, wantClose: CloseFailedToDeserializeFromJSON},
	"permitMessages overflow":  {frame: `{"type":"permit","permitMessages":2147483648}`, wantClose: CloseFailedToDeserializeFromJSON},
	"permit without permits":   {frame: `{"type":"permit"}`, wantClose: CloseFailedToDeserializeFromJSON, wantIs: ErrMissingPermitMessages},
	"permit with null permits": {frame: `{"type":"permit","permitMessages":null}`, wantClose: CloseFailedToDeserializeFromJSON, wantIs: ErrMissingPermitMessages},
	"bad protobuf id":          {frame: `{"messageId":"AAAA"}`, wantClose: CloseFailedToDeserializeFromJSON, wantIs: ErrInvalidMessageID},
	"json null":                {frame: `null`, wantClose: CloseInternalError},
	"ack without messageId":    {frame: `{}`, wantClose: CloseInternalError},
	"nack without messageId":   {frame: `{"type":"negativeAcknowledge"}`, wantClose: CloseInternalError},
	"bad base64 id":            {frame: `{"messageId":"CAMQ-DAA"}`, wantClose: CloseInternalError},
	"url-safe base64 id":       {frame: `{"type":"negativeAcknowledge","messageId":"CAMQADAA_"}`, wantClose: CloseInternalError},
}

func TestDecodeConsumerCommandErrors(t *testing.T) {
	t.Parallel()
	tests := consumerCommandErrorTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeConsumerCommand([]byte(tc.frame))
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("DecodeConsumerCommand(%q) error = %v, want *CommandError", tc.frame, err)
			}
			if ce.PulsarCloseCode != tc.wantClose {
				t.Errorf("PulsarCloseCode = %d (%s), want %d", ce.PulsarCloseCode, ce.Msg, tc.wantClose)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tc.wantIs)
			}
		})
	}
}

var readerCommandTests = map[string]struct {
	frame   string
	want    ReaderCommand
	wantErr bool
}{
	"isEndOfTopic":          {frame: `{"type":"isEndOfTopic"}`, want: ReaderCommand{IsEndOfTopic: true}},
	"ack is not validated":  {frame: `{"messageId":"not base64!"}`},
	"anything is an ack":    {frame: `{}`},
	"permit is an ack":      {frame: `{"type":"permit"}`},
	"bad json":              {frame: `nope`, wantErr: true},
	"null":                  {frame: `null`, wantErr: true},
	"wrong field type":      {frame: `{"type":[]}`, wantErr: true},
	"wrong type replaced":   {frame: `{"type":{},"type":"isEndOfTopic"}`, wantErr: true},
	"numeric type coerced":  {frame: `{"type":1}`},
	"trailing data ignored": {frame: `{"type":"isEndOfTopic"}}}`, want: ReaderCommand{IsEndOfTopic: true}},
}

func TestDecodeReaderCommand(t *testing.T) {
	t.Parallel()
	tests := readerCommandTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeReaderCommand([]byte(tc.frame))
			if tc.wantErr {
				var ce *CommandError
				if !errors.As(err, &ce) {
					t.Fatalf("error = %v, want *CommandError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

var commandFuzzSeeds = []string{
	`{"messageId":"CAMQADAA"}`,
	`{"type":"negativeAcknowledge","messageId":"CAEQAhgBIAMwBQ=="}`,
	`{"type":"permit","permitMessages":10}`,
	`{"type":"isEndOfTopic"}`,
	`{"type":"unsubscribe"}`,
	`{"type":"permit"}`, `null`, `[]`, ``, `{"messageId":"AAAA"}`,
}

func FuzzDecodeConsumerCommand(f *testing.F) {
	for _, s := range commandFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		cmd, err := DecodeConsumerCommand(frame)
		if err != nil {
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CommandError", err)
			}
			if ce.PulsarCloseCode != CloseFailedToDeserializeFromJSON && ce.PulsarCloseCode != CloseInternalError {
				t.Fatalf("unexpected close code %d", ce.PulsarCloseCode)
			}
		} else if cmd.Type == CommandAck || cmd.Type == CommandNegativeAck {
			id, err := DecodeMessageID(cmd.MessageID)
			if err != nil || !id.Equal(cmd.ID) {
				t.Fatalf("messageId %q does not decode to ID: %v", cmd.MessageID, err)
			}
		}
		_, _ = DecodeReaderCommand(frame)
	})
}
