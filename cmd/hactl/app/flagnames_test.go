package app

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagValueNames: every flag's value name in --help (pflag takes the first `quoted` word of the
// usage as it) is one word, so no help line reads like `--keep-last backup prune --yes`.
func TestFlagValueNames(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: value name %q in --help (a `quoted` phrase in its usage)", c.CommandPath(), f.Name, name)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand(Streams{In: strings.NewReader(""), Out: &strings.Builder{}, Err: &strings.Builder{}}))
}
