package etcd

import (
	"fmt"

	"github.com/hactl/hactl/internal/shell"
)

// StartCommand is the shell command that (re)starts a member's unit on its host, verb "start" or
// "restart": the data dir created 0700 when missing (etcd's recommendation; an existing one is left
// as it is), systemd reloaded, the unit enabled, then started. block waits for the unit
// (Type=notify: systemctl returns once etcd serves, for a member of a running cluster once it has
// rejoined; the operator's heal starts its learner so); without it systemctl returns at once
// (--no-block: bootstrap's founding members, only ready once a quorum of their peers is up, and
// its learners; both are checked through the client afterwards).
func StartCommand(dataDir, verb string, block bool) string {
	dir := shell.Quote(dataDir)
	noBlock := " --no-block"
	if block {
		noBlock = ""
	}
	return fmt.Sprintf("{ [ -d %s ] || mkdir -p -m 0700 %s; } && systemctl daemon-reload && systemctl enable --quiet %s && systemctl %s%s %s",
		dir, dir, UnitName, verb, noBlock, UnitName)
}
