//go:build !unix

package embedded

import "io"

// flushingReader is the reader goroutine's source: here the connection
// itself, and the writer sends every answer.
func (c *conn) flushingReader() (src io.Reader, flushes bool) { return c.nc, false }
