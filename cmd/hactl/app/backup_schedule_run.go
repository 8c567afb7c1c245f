package app

import (
	"path"

	"github.com/spf13/pflag"

	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/kubeadm"
)

// addScheduledRunFlags binds the flags `backup now` takes for scheduled runs to o (the units
// `backup schedule` installs pass them; they work from cron or by hand as well).
func addScheduledRunFlags(f *pflag.FlagSet, o *schedule.RunOptions) {
	f.DurationVar(&o.SlotEvery, "slot-every", 0, "name the object after the scheduled slot: the (timer's trigger) time in UTC truncated to this interval, e.g. 5m (instead of --slot)")
	f.StringVar(&o.TriggerUsec, "slot-trigger-usec", "", "the timer's trigger time in microseconds since the epoch ($TRIGGER_TIMER_REALTIME_USEC); default now")
	_ = f.MarkHidden("slot-trigger-usec")
	f.StringVar(&o.Textfile, "textfile", "", "after the run, write its result as a Prometheus textfile here (node_exporter textfile collector format, atomic), and every certificate's expiry next to it ("+schedule.CertificatesTextfile+")")
	f.StringSliceVar(&o.CertificateDirs, "certificate-dirs", []string{etcd.RemotePKIDir, path.Dir(kubeadm.EtcdClientCertFile)}, "with --textfile: the directories whose *.crt files "+schedule.CertificatesTextfile+" lists (missing ones are skipped)")
	f.IntVar(&o.Policy.KeepLast, "keep-last", 0, "after a stored snapshot, prune keeping the newest `N` (as backup prune --yes does)")
	f.IntVar(&o.Policy.KeepHourly, "keep-hourly", 0, "after a stored snapshot, prune keeping the newest of each of the last H hours")
	f.IntVar(&o.Policy.KeepDaily, "keep-daily", 0, "after a stored snapshot, prune keeping the newest of each of the last D days")
}
