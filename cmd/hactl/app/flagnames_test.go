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

// TestOutputFlagsAgree: every -o in the tree is outputFlag's: the same formats in its help, table
// by default, and its values complete.
func TestOutputFlagsAgree(t *testing.T) {
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.LocalFlags().Lookup("output"); f != nil {
			n++
			if f.Shorthand != "o" || f.DefValue != outputTable || !strings.Contains(f.Usage, "table, json or yaml") {
				t.Errorf("%s -o: shorthand %q, default %q, usage %q", c.CommandPath(), f.Shorthand, f.DefValue, f.Usage)
			}
			if fn, ok := c.GetFlagCompletionFunc("output"); !ok {
				t.Errorf("%s -o: no completion", c.CommandPath())
			} else if got, _ := fn(c, nil, ""); strings.Join(got, ",") != "table,json,yaml" {
				t.Errorf("%s -o completes %v", c.CommandPath(), got)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand(Streams{In: strings.NewReader(""), Out: &strings.Builder{}, Err: &strings.Builder{}}))
	if n < 20 {
		t.Fatalf("found %d commands with -o, want every report command's", n)
	}
}
