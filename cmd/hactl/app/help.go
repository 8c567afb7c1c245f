package app

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newHelpCommand is `hactl help [command]`: cobra's prints the root's help and exits 0 for a topic
// that is no command ("hactl help statsu"); this one refuses it with exit 2 and the nearest match,
// as `hactl statsu` does.
func newHelpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			c, _, err := root.Find(args)
			if err != nil || c == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err == nil && c != nil && len(rest) == 0 {
				return c.Help()
			}
			parent, topic := root, strings.Join(args, " ")
			if c != nil && len(rest) > 0 {
				parent, topic = c, rest[0]
			}
			msg := fmt.Sprintf("unknown help topic %q", topic)
			if s := parent.SuggestionsFor(topic); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return &UsageError{Err: fmt.Errorf("%s (see '%s --help')", msg, parent.CommandPath())}
		},
	}
}
