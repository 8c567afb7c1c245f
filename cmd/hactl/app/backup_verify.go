package app

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/backup"
)

type backupVerifyOptions struct {
	identityFile string
	tempDir      string
	noRecord     bool
	output       string
}

func newBackupVerifyCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [NAME|KEY|latest]",
		Short: "Download a snapshot and check it: sha256 as stored, decryption, raw sha256, etcd's integrity check",
		Long: `Downloads one complete snapshot (default: the latest) and checks its stored size and sha256 against its
metadata, decrypts it (--identity-file, or the file $` + identityEnv + ` names), decompresses it,
checks the raw sha256 and etcd's own sha256 trailer, then runs etcd's integrity check (etcdutl's
snapshot package: bbolt consistency, key count, hash, revision) on a temp file (--temp-dir needs room
for the DB). A success is recorded in <name>.verified.json: prune never deletes the newest verified
snapshot.

Exit 0 verified, 3 a check failed (named), 2 missing or wrong identity, 1 runtime failure (including
a NAME that does not exist).`,
		ValidArgsFunction: completeSnapshots(false),
		Args:              usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			ref := "latest"
			if len(args) == 1 {
				ref = args[0]
			}
			ids, err := backup.IdentitiesFrom(o.identityFile, os.Getenv)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			env, l, err := openListing(ctx, s, g)
			if err != nil {
				return err
			}
			res, err := backup.VerifyRef(ctx, env.store, l, ref, backup.VerifyOptions{Identities: ids, TempDir: o.tempDir, Record: !o.noRecord, HactlVersion: Version()}, env.p.Infof)
			if err != nil {
				return err
			}
			return writeReport(s.Out, o.output, res, res.Print)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file (AGE-SECRET-KEY-1...) for encrypted snapshots (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "directory for the temporary DB file (default the system's temp dir)")
	f.BoolVar(&o.noRecord, "no-record", false, "don't write the <name>.verified.json marker")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}
