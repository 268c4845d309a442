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
