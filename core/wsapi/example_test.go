package wsapi_test

import (
	"fmt"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
)

func ExampleParseEndpoint() {
	u, _ := url.Parse("/ws/v2/consumer/persistent/public/default/my+topic/my-sub?subscriptionType=Shared&receiverQueueSize=5000")
	ep, err := wsapi.ParseEndpoint(u.EscapedPath(), u.Query())
	if err != nil {
		fmt.Println(err)
		return
	}
	params, err := wsapi.ParseConsumerParams(u.Query())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ep.Kind, ep.Version, ep.TopicName(), ep.Subscription)
	fmt.Println(params.SubscriptionType, params.ReceiverQueueSize, *params.RequestedReceiverQueueSize)
	// Output:
	// consumer v2 persistent://public/default/my topic my-sub
	// Shared 1000 5000
}

func ExampleDecodeProducerMessage() {
	msg, ferr := wsapi.DecodeProducerMessage([]byte(`{"payload":"SGVsbG8=","context":5}`))
	if ferr != nil {
		fmt.Printf("%s\n", ferr.Ack().Encode())
		return
	}
	fmt.Printf("payload %q\n", msg.Payload)
	id := wsapi.NewMessageID(1393, 8835)
	id.BatchSize = -1 // an old-style id, without batch_size
	fmt.Printf("%s\n", wsapi.AckOK(wsapi.EncodeMessageID(id), msg.Context).Encode())

	_, ferr = wsapi.DecodeProducerMessage([]byte(`{"payload":"-_-_","context":"c"}`))
	fmt.Printf("%s\n", ferr.Ack().Encode())
	// Output:
	// payload "Hello"
	// {"result":"ok","messageId":"CPEKEINF","context":"5","errorCode":0,"schemaVersion":0}
	// {"result":"send-error:7","errorMsg":"Invalid Base64 message-payload error=Illegal base64 character 2d","context":"c","errorCode":0,"schemaVersion":0}
}

func ExampleConsumerMessage_Encode() {
	m := wsapi.ConsumerMessage{
		MessageID:   wsapi.EncodeMessageID(wsapi.NewMessageID(3, 0)),
		Payload:     []byte("Hello World"),
		PublishTime: time.Date(2018, 11, 26, 14, 22, 59, 840_000_000, time.FixedZone("CET", 3600)),
	}
	fmt.Printf("%s\n", m.Encode())
	// Output:
	// {"messageId":"CAMQADAA","payload":"SGVsbG8gV29ybGQ=","properties":{},"publishTime":"2018-11-26T14:22:59.84+01:00","redeliveryCount":0}
}

func ExampleDecodeConsumerCommand() {
	for _, frame := range []string{
		`{"messageId":"CAMQADAA"}`,
		`{"type":"permit","permitMessages":10}`,
		`{"type":"isEndOfTopic"}`,
		`{"type":"permit"}`,
	} {
		cmd, err := wsapi.DecodeConsumerCommand([]byte(frame))
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		switch cmd.Type {
		case wsapi.CommandAck:
			fmt.Println("ack", cmd.ID)
		case wsapi.CommandPermit:
			fmt.Println("permit", cmd.PermitMessages)
		case wsapi.CommandIsEndOfTopic:
			fmt.Printf("%s\n", wsapi.EndOfTopicResponse(false))
		}
	}
	// Output:
	// ack 3:0:-1:-1
	// permit 10
	// {"endOfTopic":false}
	// error: Missing required permitMessages field for 'permit' command
}
