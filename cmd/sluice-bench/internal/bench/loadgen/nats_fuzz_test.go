package loadgen

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzNatsRead feeds arbitrary server bytes to the NATS operation parser: it never panics,
// never returns a payload past its bound, and every MSG payload it returns was followed by
// CRLF in the input.
func FuzzNatsRead(f *testing.F) {
	for _, seed := range []string{
		"INFO {\"server_id\":\"x\"}\r\nPING\r\nPONG\r\n+OK\r\n",
		"MSG _INBOX.ab.1 1 29\r\n{\"stream\":\"sluice-bench\",\"seq\":1}\r\n",
		"MSG a 1 r 3\r\nabc\r\nMSG a 1 2\r\nab",
		"MSG a 1 99999999999\r\n",
		"MSG a 1 -1\r\n",
		"MSG a\r\n",
		"-ERR 'Authorization Violation'\r\n",
		"msg a 1 0\r\n\r\nping\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &natsConn{r: bufio.NewReaderSize(bytes.NewReader(data), natsMaxLine)}
		for range len(data) + 1 {
			op, err := c.read()
			if err != nil {
				return
			}
			if op.kind == natsMsg {
				if len(op.payload) > natsMaxPayload {
					t.Fatalf("payload of %d bytes", len(op.payload))
				}
				if !bytes.Contains(data, append(bytes.Clone(op.payload), '\r', '\n')) {
					t.Fatalf("payload %q not in the input followed by CRLF", op.payload)
				}
			}
		}
	})
}
