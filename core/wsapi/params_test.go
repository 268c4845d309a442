package wsapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustQuery(t testing.TB, raw string) url.Values {
	t.Helper()
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", raw, err)
	}
	return q
}

// checkParamsErr checks that err is a 400 *Error whose message contains want.
func checkParamsErr(t *testing.T, err error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want *Error", err)
	}
	if e.Status != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", e.Status)
	}
	if !strings.HasPrefix(e.Message, "Invalid query params: ") || !strings.Contains(e.Message, want) {
		t.Errorf("message = %q, want \"Invalid query params: ...%s...\"", e.Message, want)
	}
}

func defaultProducerParams() ProducerParams {
	return ProducerParams{
		HashingScheme:      JavaStringHash,
		SendTimeoutMillis:  30000,
		MessageRoutingMode: SinglePartition,
		CompressionType:    CompressionNone,
	}
}

func clientSideKeysParam(t testing.TB, json string) string {
	t.Helper()
	return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(json)))
}

func TestParseProducerParams(t *testing.T) {
	t.Parallel()
	with := func(f func(*ProducerParams)) ProducerParams {
		p := defaultProducerParams()
		f(&p)
		return p
	}
	tests := map[string]struct {
		query   string
		want    ProducerParams
		wantErr string
	}{
		"defaults":            {query: "", want: defaultProducerParams()},
		"unknown":             {query: "foo=bar&blockIfQueueFull=true", want: defaultProducerParams()},
		"producerName":        {query: "producerName=p1&producerName=p2", want: with(func(p *ProducerParams) { p.ProducerName = "p1" })},
		"token":               {query: "token=abc", want: with(func(p *ProducerParams) { p.Token = "abc" })},
		"producerName blank":  {query: "producerName=&sendTimeoutMillis=-1", wantErr: "producerName cannot be blank"},
		"producerName spaces": {query: "producerName=%20%09", wantErr: "producerName cannot be blank"},
		"producerName no-break space": {
			query: "producerName=%C2%A0", want: with(func(p *ProducerParams) { p.ProducerName = "\u00a0" }),
		},
		"initialSequenceId": {
			query: "initialSequenceId=-9223372036854775808",
			want:  with(func(p *ProducerParams) { p.InitialSequenceID = ptr(int64(-9223372036854775808)) }),
		},
		"initialSequenceId plus sign": {
			query: "initialSequenceId=%2B42",
			want:  with(func(p *ProducerParams) { p.InitialSequenceID = ptr(int64(42)) }),
		},
		"initialSequenceId overflow": {query: "initialSequenceId=9223372036854775808", wantErr: `For input string: "9223372036854775808"`},
		"initialSequenceId bad":      {query: "initialSequenceId=1.5", wantErr: `initialSequenceId: For input string: "1.5"`},
		"hashingScheme Murmur":       {query: "hashingScheme=Murmur3_32Hash", want: with(func(p *ProducerParams) { p.HashingScheme = Murmur3_32Hash })},
		"hashingScheme bad":          {query: "hashingScheme=murmur", wantErr: "No enum constant org.apache.pulsar.client.api.HashingScheme.murmur"},
		"sendTimeoutMillis":          {query: "sendTimeoutMillis=0", want: with(func(p *ProducerParams) { p.SendTimeoutMillis = 0 })},
		"sendTimeoutMillis negative": {query: "sendTimeoutMillis=-1", wantErr: "sendTimeout needs to be >= 0"},
		"sendTimeoutMillis space":    {query: "sendTimeoutMillis=+1", wantErr: `For input string: " 1"`},
		"sendTimeoutMillis empty":    {query: "sendTimeoutMillis=", wantErr: `For input string: ""`},
		"sendTimeoutMillis overflow": {query: "sendTimeoutMillis=2147483648", wantErr: "For input string"},
		"routing RoundRobin": {
			query: "messageRoutingMode=RoundRobinPartition",
			want:  with(func(p *ProducerParams) { p.MessageRoutingMode = RoundRobinPartition }),
		},
		"routing Custom ignored": {query: "messageRoutingMode=CustomPartition", want: defaultProducerParams()},
		"routing bad":            {query: "messageRoutingMode=roundrobin", wantErr: "Invalid messageRoutingMode roundrobin"},
		"batching params ignored without batching": {
			query: "batchingMaxMessages=x&maxPendingMessages=5&batchingMaxPublishDelay=0",
			want:  with(func(p *ProducerParams) { p.RequestedMaxPendingMessages = ptr(5) }),
		},
		"batching params ignored with batching false": {
			query: "batchingEnabled=false&maxPendingMessages=-3",
			want:  with(func(p *ProducerParams) { p.RequestedMaxPendingMessages = ptr(-3) }),
		},
		"unparseable maxPendingMessages ignored without batching":  {query: "maxPendingMessages=lots", want: defaultProducerParams()},
		"maxPendingMessages past 32 bits ignored without batching": {query: "maxPendingMessages=4294967296", want: defaultProducerParams()},
		"batching enabled": {
			query: "batchingEnabled=TRUE&batchingMaxMessages=100&maxPendingMessages=0&batchingMaxPublishDelay=10",
			want: with(func(p *ProducerParams) {
				p.BatchingEnabled = true
				p.BatchingMaxMessages = ptr(100)
				p.MaxPendingMessages = ptr(0)
				p.RequestedMaxPendingMessages = ptr(0)
				p.BatchingMaxPublishDelayMillis = ptr(10)
			}),
		},
		"batchingEnabled yes is false":   {query: "batchingEnabled=yes", want: defaultProducerParams()},
		"batchingMaxMessages bad":        {query: "batchingEnabled=true&batchingMaxMessages=x", wantErr: `batchingMaxMessages: For input string: "x"`},
		"batchingMaxMessages negative":   {query: "batchingEnabled=true&batchingMaxMessages=-1", want: with(func(p *ProducerParams) { p.BatchingEnabled = true; p.BatchingMaxMessages = ptr(-1) })},
		"maxPendingMessages negative":    {query: "batchingEnabled=true&maxPendingMessages=-1", wantErr: "maxPendingMessages needs to be >= 0"},
		"maxPendingMessages bad":         {query: "batchingEnabled=true&maxPendingMessages=1e3", wantErr: `For input string: "1e3"`},
		"batchingMaxPublishDelay zero":   {query: "batchingEnabled=true&batchingMaxPublishDelay=0", wantErr: "configured value for batch delay must be at least 1ms"},
		"batchingMaxPublishDelay bad":    {query: "batchingEnabled=true&batchingMaxPublishDelay=1ms", wantErr: `For input string: "1ms"`},
		"compressionType":                {query: "compressionType=ZSTD", want: with(func(p *ProducerParams) { p.CompressionType = CompressionZSTD })},
		"compressionType bad":            {query: "compressionType=zstd", wantErr: "Invalid compressionType zstd"},
		"server-side encryptionKeys":     {query: "encryptionKeys=a,b,,", want: with(func(p *ProducerParams) { p.EncryptionKeys = []string{"a", "b"} })},
		"server-side encryptionKeys one": {query: "encryptionKeys=client-ecdsa.pem", want: with(func(p *ProducerParams) { p.EncryptionKeys = []string{"client-ecdsa.pem"} })},
		"server-side leading empty":      {query: "encryptionKeys=,a", want: with(func(p *ProducerParams) { p.EncryptionKeys = []string{"", "a"} })},
		"server-side empty":              {query: "encryptionKeys=", want: with(func(p *ProducerParams) { p.EncryptionKeys = []string{""} })},
		"order: hashingScheme before routing": {
			query:   "messageRoutingMode=bad&hashingScheme=bad",
			wantErr: "HashingScheme.bad",
		},
		"order: routing before compression": {
			query:   "compressionType=bad&messageRoutingMode=bad",
			wantErr: "Invalid messageRoutingMode bad",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseProducerParams(mustQuery(t, tc.query))
			if tc.wantErr != "" {
				checkParamsErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("ParseProducerParams(%q): %v", tc.query, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParseProducerParams(%q) (-got +want):\n%s", tc.query, diff)
			}
		})
	}
}

func TestParseProducerParamsClientSideEncryption(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString([]byte("secret"))
	tests := map[string]struct {
		keysJSON   string
		extra      string
		raw        string // used instead of keysJSON when set
		wantKeys   []ClientSideKey
		wantServer []string
		wantErr    string
	}{
		"one key": {
			keysJSON: `{"client-rsa.pem":{"keyValue":"` + key + `","metadata":{"k":"v"}}}`,
			wantKeys: []ClientSideKey{{Name: "client-rsa.pem", Value: []byte("secret"), Metadata: map[string]string{"k": "v"}}},
		},
		"order kept, names trimmed, batching and compression ignored": {
			keysJSON: `{" b ":{"keyValue":"` + key + `"},"a":{"keyValue":"AA=="}}`,
			extra:    "&batchingEnabled=true&maxPendingMessages=x&compressionType=bogus",
			wantKeys: []ClientSideKey{{Name: "b", Value: []byte("secret")}, {Name: "a", Value: []byte{0}}},
		},
		"first keyValue null means server-side": {
			keysJSON:   `{"a":{"metadata":{}}}`,
			wantServer: nil, // set below: the raw param split on ','
		},
		"empty object means server-side":        {keysJSON: `{}`},
		"bad keyValue base64 means server-side": {keysJSON: `{"a":{"keyValue":"-_"}}`},
		"unpadded keyValue, numeric metadata coerced, unknown field ignored": {
			keysJSON: `{"a":{"keyValue":"AA","metadata":{"n":1},"extra":true}}`,
			wantKeys: []ClientSideKey{{Name: "a", Value: []byte{0}, Metadata: map[string]string{"n": "1"}}},
		},
		"not JSON means server-side": {raw: "a,b", wantServer: []string{"a", "b"}},
		"blank key":                  {keysJSON: `{"a":{"keyValue":"AA=="}," ":{"keyValue":"AA=="}}`, wantErr: "Empty param encryptionKeys.key"},
		"null value":                 {keysJSON: `{"a":{"keyValue":"AA=="},"b":null}`, wantErr: "Empty param encryptionKeys.value"},
		"first value null":           {keysJSON: `{"a":null}`, wantErr: "Empty param encryptionKeys.value"},
		"missing keyValue":           {keysJSON: `{"a":{"keyValue":"AA=="},"b":{}}`, wantErr: "Empty param encryptionKeys.value.keyValue"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			param := tc.raw
			if param == "" {
				param = clientSideKeysParam(t, tc.keysJSON)
			}
			got, err := ParseProducerParams(mustQuery(t, "encryptionKeys="+param+tc.extra))
			if tc.wantErr != "" {
				checkParamsErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got.ClientSideKeys, tc.wantKeys); diff != "" {
				t.Errorf("ClientSideKeys (-got +want):\n%s", diff)
			}
			if got.ClientSideEncryption() != (tc.wantKeys != nil) {
				t.Errorf("ClientSideEncryption() = %v", got.ClientSideEncryption())
			}
			if tc.wantKeys != nil {
				if got.BatchingEnabled || got.CompressionType != CompressionNone || got.EncryptionKeys != nil {
					t.Errorf("client-side mode: got batching %v, compression %v, server keys %v", got.BatchingEnabled, got.CompressionType, got.EncryptionKeys)
				}
				return
			}
			if len(got.EncryptionKeys) == 0 {
				t.Errorf("server-side mode: EncryptionKeys empty")
			}
			if tc.wantServer != nil {
				if diff := cmp.Diff(got.EncryptionKeys, tc.wantServer); diff != "" {
					t.Errorf("EncryptionKeys (-got +want):\n%s", diff)
				}
			}
		})
	}
}

func defaultConsumerParams() ConsumerParams {
	return ConsumerParams{
		SubscriptionType:                 Exclusive,
		SubscriptionMode:                 Durable,
		SubscriptionInitialPosition:      Latest,
		ReceiverQueueSize:                1000,
		NegativeAckRedeliveryDelayMillis: 60000,
		CryptoFailureAction:              CryptoFail,
	}
}

func TestParseConsumerParams(t *testing.T) {
	t.Parallel()
	with := func(f func(*ConsumerParams)) ConsumerParams {
		p := defaultConsumerParams()
		f(&p)
		return p
	}
	tests := map[string]struct {
		query   string
		want    ConsumerParams
		wantErr string
	}{
		"defaults":            {query: "", want: defaultConsumerParams()},
		"unknown and v3 ones": {query: "topics=a&x=y", want: defaultConsumerParams()},
		"subscriptionType":    {query: "subscriptionType=Key_Shared", want: with(func(p *ConsumerParams) { p.SubscriptionType = KeyShared })},
		"subscriptionType case-sensitive": {
			query: "subscriptionType=shared", wantErr: "Invalid subscriptionType shared",
		},
		"subscriptionMode":            {query: "subscriptionMode=NonDurable", want: with(func(p *ConsumerParams) { p.SubscriptionMode = NonDurable })},
		"subscriptionMode bad":        {query: "subscriptionMode=Transient", wantErr: "Invalid subscriptionMode Transient"},
		"subscriptionInitialPosition": {query: "subscriptionInitialPosition=Earliest", want: with(func(p *ConsumerParams) { p.SubscriptionInitialPosition = Earliest })},
		"subscriptionInitialPosition bad": {
			query: "subscriptionInitialPosition=earliest", wantErr: "Invalid subscriptionInitialPosition earliest",
		},
		"ackTimeoutMillis 0":    {query: "ackTimeoutMillis=0", want: defaultConsumerParams()},
		"ackTimeoutMillis 1000": {query: "ackTimeoutMillis=1000", want: with(func(p *ConsumerParams) { p.AckTimeoutMillis = 1000 })},
		"ackTimeoutMillis 999":  {query: "ackTimeoutMillis=999", wantErr: "Ack timeout should be greater than 1000 ms"},
		"ackTimeoutMillis -1":   {query: "ackTimeoutMillis=-1", wantErr: "Ack timeout should be greater than 1000 ms"},
		"ackTimeoutMillis bad":  {query: "ackTimeoutMillis=1s", wantErr: `For input string: "1s"`},
		"receiverQueueSize capped": {
			query: "receiverQueueSize=1001",
			want:  with(func(p *ConsumerParams) { p.RequestedReceiverQueueSize = ptr(1001) }),
		},
		"receiverQueueSize small": {
			query: "receiverQueueSize=10",
			want:  with(func(p *ConsumerParams) { p.ReceiverQueueSize = 10; p.RequestedReceiverQueueSize = ptr(10) }),
		},
		"receiverQueueSize zero": {
			query: "receiverQueueSize=0",
			want:  with(func(p *ConsumerParams) { p.ReceiverQueueSize = 0; p.RequestedReceiverQueueSize = ptr(0) }),
		},
		"receiverQueueSize negative": {query: "receiverQueueSize=-1", wantErr: "receiverQueueSize needs to be >= 0"},
		"receiverQueueSize bad":      {query: "receiverQueueSize=ten", wantErr: `receiverQueueSize: For input string: "ten"`},
		"consumerName":               {query: "consumerName=c", want: with(func(p *ConsumerParams) { p.ConsumerName = "c" })},
		"consumerName blank":         {query: "consumerName=", wantErr: "consumerName cannot be blank"},
		"consumerName spaces":        {query: "consumerName=+", wantErr: "consumerName cannot be blank"},
		"priorityLevel":              {query: "priorityLevel=3", want: with(func(p *ConsumerParams) { p.PriorityLevel = 3 })},
		"priorityLevel negative":     {query: "priorityLevel=-1", wantErr: "priorityLevel needs to be >= 0"},
		"negativeAckRedeliveryDelay": {query: "negativeAckRedeliveryDelay=0", want: with(func(p *ConsumerParams) { p.NegativeAckRedeliveryDelayMillis = 0 })},
		"negativeAckRedeliveryDelay negative": {
			query: "negativeAckRedeliveryDelay=-5", wantErr: "redeliveryDelay needs to be >= 0",
		},
		"maxRedeliverCount": {query: "maxRedeliverCount=1", want: with(func(p *ConsumerParams) { p.MaxRedeliverCount = 1 })},
		"maxRedeliverCount and deadLetterTopic": {
			query: "maxRedeliverCount=1&deadLetterTopic=persistent://t/ns/dlq&negativeAckRedeliveryDelay=1000",
			want: with(func(p *ConsumerParams) {
				p.MaxRedeliverCount = 1
				p.DeadLetterTopic = "persistent://t/ns/dlq"
				p.NegativeAckRedeliveryDelayMillis = 1000
			}),
		},
		"deadLetterTopic alone":  {query: "deadLetterTopic=x", wantErr: "MaxRedeliverCount must be > 0."},
		"maxRedeliverCount zero": {query: "maxRedeliverCount=0", wantErr: "MaxRedeliverCount must be > 0."},
		"maxRedeliverCount bad":  {query: "maxRedeliverCount=x&deadLetterTopic=y", wantErr: `For input string: "x"`},
		"pullMode":               {query: "pullMode=True", want: with(func(p *ConsumerParams) { p.PullMode = true })},
		"pullMode 1 is false":    {query: "pullMode=1", want: defaultConsumerParams()},
		"cryptoFailureAction":    {query: "cryptoFailureAction=CONSUME", want: with(func(p *ConsumerParams) { p.CryptoFailureAction = CryptoConsume })},
		"cryptoFailureAction invalid ignored": {
			query: "cryptoFailureAction=consume", want: defaultConsumerParams(),
		},
		"token": {query: "token=t", want: with(func(p *ConsumerParams) { p.Token = "t" })},
		"order: ackTimeout first": {
			query: "subscriptionType=bad&ackTimeoutMillis=5", wantErr: "Ack timeout",
		},
		"order: receiverQueueSize before priorityLevel": {
			query: "priorityLevel=-1&receiverQueueSize=-1", wantErr: "receiverQueueSize",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseConsumerParams(mustQuery(t, tc.query))
			if tc.wantErr != "" {
				checkParamsErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("ParseConsumerParams(%q): %v", tc.query, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParseConsumerParams(%q) (-got +want):\n%s", tc.query, diff)
			}
		})
	}
}

func TestConsumerParamsDerived(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		query       string
		wantPending int
		wantDLQ     string
	}{
		"default":             {query: "", wantPending: 1000},
		"zero queue":          {query: "receiverQueueSize=0", wantPending: 1},
		"pull mode":           {query: "pullMode=true&receiverQueueSize=5", wantPending: 0},
		"default DLQ":         {query: "maxRedeliverCount=3", wantPending: 1000, wantDLQ: "persistent://my-property/my-ns/my-topic-my-subscription-DLQ"},
		"explicit DLQ":        {query: "maxRedeliverCount=3&deadLetterTopic=dlq", wantPending: 1000, wantDLQ: "dlq"},
		"empty explicit DLQ":  {query: "maxRedeliverCount=3&deadLetterTopic=", wantPending: 1000, wantDLQ: "persistent://my-property/my-ns/my-topic-my-subscription-DLQ"},
		"blank explicit DLQ":  {query: "maxRedeliverCount=3&deadLetterTopic=%20%09", wantPending: 1000, wantDLQ: "persistent://my-property/my-ns/my-topic-my-subscription-DLQ"},
		"capped queue 2000":   {query: "receiverQueueSize=2000", wantPending: 1000},
		"queue 7, push mode":  {query: "receiverQueueSize=7", wantPending: 7},
		"pull overrides zero": {query: "receiverQueueSize=0&pullMode=TRUE", wantPending: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := ParseConsumerParams(mustQuery(t, tc.query))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.PendingLimit(); got != tc.wantPending {
				t.Errorf("PendingLimit() = %d, want %d", got, tc.wantPending)
			}
			if got := p.DeadLetterTopicFor("persistent://my-property/my-ns/my-topic", "my-subscription"); got != tc.wantDLQ {
				t.Errorf("DeadLetterTopicFor() = %q, want %q", got, tc.wantDLQ)
			}
		})
	}
}

func TestParseReaderParams(t *testing.T) {
	t.Parallel()
	def := ReaderParams{ReceiverQueueSize: 1000, CryptoFailureAction: CryptoFail}
	with := func(f func(*ReaderParams)) ReaderParams {
		p := def
		f(&p)
		return p
	}
	tests := map[string]struct {
		query   string
		want    ReaderParams
		wantErr string
	}{
		"defaults":                      {query: "", want: def},
		"readerName":                    {query: "readerName=r", want: with(func(p *ReaderParams) { p.ReaderName = "r" })},
		"queue capped":                  {query: "receiverQueueSize=5000", want: with(func(p *ReaderParams) { p.RequestedReceiverQueueSize = ptr(5000) })},
		"queue zero":                    {query: "receiverQueueSize=0", want: with(func(p *ReaderParams) { p.ReceiverQueueSize = 0; p.RequestedReceiverQueueSize = ptr(0) })},
		"queue bad":                     {query: "receiverQueueSize=x", wantErr: `For input string: "x"`},
		"queue negative":                {query: "receiverQueueSize=-2", wantErr: "receiverQueueSize needs to be >= 0"},
		"queue negative, messageId bad": {query: "receiverQueueSize=-1&messageId=%25", wantErr: "Invalid messageId base64 value"},
		"queue bad, messageId bad":      {query: "receiverQueueSize=x&messageId=%25", wantErr: `For input string: "x"`},
		"messageId latest":              {query: "messageId=latest", want: def},
		"messageId blank":               {query: "messageId=+", want: def},
		"messageId earliest": {
			query: "messageId=earliest", want: with(func(p *ReaderParams) { p.Start = StartEarliest }),
		},
		"messageId Earliest is base64": {query: "messageId=Earliest", wantErr: "messageId"},
		"messageId id": {
			query: "messageId=CAMQADAA",
			want:  with(func(p *ReaderParams) { p.Start = StartAfterMessageID; p.StartMessageID = NewMessageID(3, 0) }),
		},
		"messageId unpadded": {
			query: "messageId=CAAQAw",
			want: with(func(p *ReaderParams) {
				p.Start = StartAfterMessageID
				p.StartMessageID = MessageID{LedgerID: 0, EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1}
			}),
		},
		"messageId plus became space": {query: "messageId=CA+QADAA", wantErr: "Invalid messageId base64 value"},
		"messageId not protobuf":      {query: "messageId=AAAA", wantErr: "Invalid messageId value"},
		"cryptoFailureAction":         {query: "cryptoFailureAction=DISCARD", want: with(func(p *ReaderParams) { p.CryptoFailureAction = CryptoDiscard })},
		"cryptoFailureAction invalid": {query: "cryptoFailureAction=x", want: def},
		"token":                       {query: "token=Bearer%20x", want: with(func(p *ReaderParams) { p.Token = "Bearer x" })},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseReaderParams(mustQuery(t, tc.query))
			if tc.wantErr != "" {
				checkParamsErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("ParseReaderParams(%q): %v", tc.query, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParseReaderParams(%q) (-got +want):\n%s", tc.query, diff)
			}
		})
	}
	if got := (ReaderParams{}).PendingLimit(); got != 1 {
		t.Errorf("PendingLimit() with queue 0 = %d, want 1", got)
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		header, token, want string
	}{
		"header wins":         {header: "Bearer h", token: "q", want: "Bearer h"},
		"token prefixed":      {token: "abc", want: "Bearer abc"},
		"token already":       {token: "Bearer abc", want: "Bearer abc"},
		"token lower bearer":  {token: "bearer abc", want: "Bearer bearer abc"},
		"neither":             {want: ""},
		"basic header kept":   {header: "Basic eDp5", token: "abc", want: "Basic eDp5"},
		"empty token ignored": {token: "", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := BearerToken(tc.header, tc.token); got != tc.want {
				t.Errorf("BearerToken(%q, %q) = %q, want %q", tc.header, tc.token, got, tc.want)
			}
		})
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"",
		"receiverQueueSize=1001&subscriptionType=Shared&pullMode=true",
		"batchingEnabled=true&maxPendingMessages=0&batchingMaxPublishDelay=1",
		"maxRedeliverCount=1&deadLetterTopic=x&ackTimeoutMillis=1000",
		"messageId=CAMQADAA&receiverQueueSize=0",
		"encryptionKeys=" + base64.StdEncoding.EncodeToString([]byte(`{"k":{"keyValue":"AA=="}}`)),
		"initialSequenceId=%2B%D9%A3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		check := func(err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.HasPrefix(e.Message, "Invalid query params: ") {
				t.Fatalf("error %v is not a 400 \"Invalid query params\" *Error", err)
			}
		}
		pp, err := ParseProducerParams(q)
		check(err)
		if err == nil {
			if pp.SendTimeoutMillis < 0 || (pp.MaxPendingMessages != nil && *pp.MaxPendingMessages < 0) {
				t.Fatalf("producer params out of range: %+v", pp)
			}
		}
		cp, err := ParseConsumerParams(q)
		check(err)
		if err == nil {
			if cp.ReceiverQueueSize < 0 || cp.ReceiverQueueSize > MaxReceiverQueueSize {
				t.Fatalf("receiverQueueSize out of range: %d", cp.ReceiverQueueSize)
			}
			if cp.AckTimeoutMillis != 0 && cp.AckTimeoutMillis < MinAckTimeoutMillis {
				t.Fatalf("ackTimeoutMillis out of range: %d", cp.AckTimeoutMillis)
			}
		}
		rp, err := ParseReaderParams(q)
		check(err)
		if err == nil && (rp.ReceiverQueueSize < 0 || rp.ReceiverQueueSize > MaxReceiverQueueSize) {
			t.Fatalf("reader receiverQueueSize out of range: %d", rp.ReceiverQueueSize)
		}
	})
}
