//go:build !linux

package app

import (
	"io"

	"github.com/hactl/hactl/bootstrap"
)

// terminalPrompter: secrets are read from the environment variables the spec names only.
func terminalPrompter(io.Reader, io.Writer) bootstrap.Prompter { return nil }
