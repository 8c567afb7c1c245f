package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/ui"
)

func newEtcdAlarmCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alarm",
		Short: "List or disarm etcd's alarms (NOSPACE recovered in etcd's order)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdAlarmListCommand(s, g), newEtcdAlarmDisarmCommand(s, g))
	return cmd
}

func printAlarms(w io.Writer, as []maintenance.Alarm) {
	if len(as) == 0 {
		fmt.Fprintln(w, "no active alarm")
		return
	}
	var rows [][]string
	for _, a := range as {
		rows = append(rows, []string{a.Alarm, a.Member, a.MemberID})
	}
	ui.Table(w, []string{"ALARM", "MEMBER", "MEMBER-ID"}, rows)
}
