package loadgen

import "testing"

func TestParseMessage(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		frame string
		id    string
		n     int
		ok    bool
	}{
		"sluice order":     {`{"messageId":"CAEQAg==","payload":"aGVsbG8=","properties":{},"publishTime":"x"}`, "CAEQAg==", 5, true},
		"other order":      {`{"payload":"aGk=","messageId":"CAE="}`, "CAE=", 2, true},
		"spaces":           {`{"messageId" : "CAE=", "payload" : "aGk="}`, "CAE=", 2, true},
		"empty payload":    {`{"messageId":"CAE=","payload":""}`, "CAE=", 0, true},
		"not a message":    {`{"type":"isEndOfTopic","endOfTopic":false}`, "", 0, false},
		"not json":         {`pong`, "", 0, false},
		"escaped via json": {`{"messageId":"CA\u0045=","payload":"aGk="}`, "CAE=", 2, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id, n, ok := parseMessage([]byte(c.frame))
			if string(id) != c.id || n != c.n || ok != c.ok {
				t.Errorf("parseMessage(%s) = %q, %d, %v; want %q, %d, %v", c.frame, id, n, ok, c.id, c.n, c.ok)
			}
		})
	}
}

func TestOKAck(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		frame string
		seq   uint64
		ok    bool
	}{
		"sluice":          {`{"result":"ok","messageId":"CAEQAjAA","context":"123"}`, 123, true},
		"context first":   {`{"context":"7","result":"ok","messageId":"CAE="}`, 7, true},
		"send error":      {`{"result":"send-error:7","errorMsg":"limit","context":"5"}`, 0, false},
		"escaped context": {`{"result":"ok","context":"1\u0032"}`, 0, false},
		"no context":      {`{"result":"ok","messageId":"CAE="}`, 0, false},
		"not a number":    {`{"result":"ok","context":"x1"}`, 0, false},
		"too long":        {`{"result":"ok","context":"123456789012345678901"}`, 0, false},
		"empty":           {`{"result":"ok","context":""}`, 0, false},
	}
	for name, c := range cases {
		seq, ok := okAck([]byte(c.frame))
		if seq != c.seq || ok != c.ok {
			t.Errorf("%s: okAck(%s) = %d, %v; want %d, %v", name, c.frame, seq, ok, c.seq, c.ok)
		}
	}
}

func TestPublishReply(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		line string
		id   uint64
		ok   bool
	}{
		"success":    {`{"id":42,"publish":{}}`, 42, true},
		"error":      {`{"id":42,"error":{"code":108,"message":"not available"}}`, 0, false},
		"with data":  {`{"id":42,"publish":{"offset":3}}`, 0, false},
		"ping":       {`{}`, 0, false},
		"spaces":     {`{"id": 42,"publish":{}}`, 0, false},
		"no id":      {`{"id":,"publish":{}}`, 0, false},
		"connect id": {`{"id":1,"connect":{}}`, 0, false},
	}
	for name, c := range cases {
		id, ok := publishReply([]byte(c.line))
		if id != c.id || ok != c.ok {
			t.Errorf("%s: publishReply(%s) = %d, %v; want %d, %v", name, c.line, id, ok, c.id, c.ok)
		}
	}
}
