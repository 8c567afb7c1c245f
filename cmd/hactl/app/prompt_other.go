//go:build !linux

package app

import (
	"io"
	"os"

	"github.com/hactl/hactl/provision"
)

// terminalPrompter: secrets are read from the environment variables the spec names only.
func terminalPrompter(io.Reader, io.Writer) provision.Prompter { return nil }

// isTerminal: without a terminal check on this platform, nothing is asked (--yes is needed).
func isTerminal(*os.File) bool { return false }
