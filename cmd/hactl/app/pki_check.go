package app

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/pki/check"
	"github.com/hactl/hactl/ui"
)

type pkiCheckOptions struct {
	output            string
	acceptNewHostKeys bool
}

func newPKICheckCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &pkiCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Show every certificate on every etcd and control-plane host and in the state dir: SANs, expiry, issuer",
		Long: fmt.Sprintf(`Connects to every etcd and control-plane host over SSH (one command each) and reads its
certificates (never keys): every one under /etc/etcd/pki on an etcd member, and kube-apiserver's etcd
CA and client certificate (%s, %s) on a control-plane host. It lists
per host and for the local state dir: file, subject, SANs, not-after, days left, and whether the state
dir's CA issued it (fingerprints compared, signatures checked). A control-plane host without those two
files is a problem.

Exit code 0 when every certificate is signed by the CA and none expires within %d days; 3 when one
does (re-run 'hactl bootstrap' to renew certificates); 1 when a host could not be read.`, kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, check.WarnDays),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if err := checkSSHEnvironment(c, g.file); err != nil {
				return err
			}
			rep, err := check.Run(cmd.Context(), check.Options{
				Cluster: c, AcceptNewHostKeys: o.acceptNewHostKeys, Printer: p, Prompt: terminalPrompter(s.In, s.Err),
			})
			if rep != nil {
				if err := writeReport(s.Out, o.output, rep, func(w io.Writer) { printPKIReport(w, rep) }); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return &VerdictError{Err: fmt.Errorf("pki check of cluster %s: %d problem(s): %s", c.Metadata.Name, len(rep.Problems),
					strings.Join(rep.Problems, "; "))}
			}
			return nil
		},
	}
	outputFlag(cmd, &o.output, "output", "")
	cmd.Flags().BoolVar(&o.acceptNewHostKeys, "accept-new-host-keys", false, "append UNKNOWN SSH host keys to the known_hosts file (changed keys are always refused)")
	return cmd
}

func printPKIReport(w io.Writer, rep *check.Report) {
	fmt.Fprintf(w, "cluster %s  CA %s %s (expires %s)\n\n", rep.Cluster, rep.CA.Subject, rep.CA.Fingerprint,
		rep.CA.NotAfter.Format("2006-01-02"))
	var rows [][]string
	row := func(where string, c check.CertCheck) {
		if c.Subject == "" { // unreadable file
			rows = append(rows, []string{where, c.Path, "-", "-", "-", "-", "-", strings.Join(c.Problems, "; ")})
			return
		}
		sans := dash(strings.Join(c.SANs(), ","))
		ca := "yes"
		if !c.SignedByCA {
			ca = "NO"
		}
		rows = append(rows, []string{where, c.Path, c.Subject, sans, c.NotAfter.Format("2006-01-02"), fmt.Sprintf("%dd", c.DaysLeft), ca,
			strings.Join(c.Problems, "; ")})
	}
	for _, h := range rep.Hosts {
		if h.Error != "" {
			rows = append(rows, []string{h.Host, "-", "-", "-", "-", "-", "-", "UNREACHABLE"})
			continue
		}
		for _, c := range h.Certificates {
			row(h.Host, c)
		}
	}
	for _, c := range rep.Local {
		row("local", c)
	}
	ui.Table(w, []string{"HOST", "FILE", "SUBJECT", "SANS", "NOT-AFTER", "LEFT", "SIGNED-BY-CA", "PROBLEM"}, rows)
	sep := "\n"
	for _, h := range rep.Hosts {
		if h.Error != "" {
			fmt.Fprintf(w, "%s%s: %s\n", sep, h.Host, h.Error)
			sep = ""
		}
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "\nPROBLEMS:\n  %s\n", strings.Join(rep.Problems, "\n  "))
		return
	}
	if rep.OK {
		fmt.Fprintf(w, "\nok: every certificate is signed by the CA and none expires within %d days\n", rep.WarnDays)
	}
}

// dash is s, or "-" for "".
func dash(s string) string { return cmp.Or(s, "-") }
