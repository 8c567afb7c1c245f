package bootstrap

import "io"

func copyBuffer(w io.Writer, r io.Reader) (int64, error) {
	return io.CopyBuffer(w, r, make([]byte, 1<<20))
}
