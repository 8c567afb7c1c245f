package app

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/specload"
)

// Shell completion of flag values and arguments (cobra's __complete, behind `hactl completion`).
// Hosts and zones come from the spec named by -f, read locally (decode errors complete nothing);
// snapshot names from spec.backup's object store, asked once with a short deadline. Nothing here
// contacts a host.

// completionStoreTimeout bounds the object store listing behind a snapshot completion.
const completionStoreTimeout = 5 * time.Second

// completionSpec decodes the spec -f names, or nil.
func completionSpec(cmd *cobra.Command) *v1alpha1.Cluster {
	path, err := cmd.Flags().GetString("file")
	if err != nil || path == "" {
		return nil
	}
	// A regular file only: opening a FIFO (or /dev/stdin) would block the shell's completion.
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	c, _, err := specload.Load(path)
	if err != nil {
		return nil
	}
	return c
}

// hostNames returns the spec's host names, those with role when role is not "".
func hostNames(c *v1alpha1.Cluster, role v1alpha1.Role) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, h := range c.Spec.Hosts {
		if role == "" || slices.Contains(h.Roles, role) {
			out = append(out, h.Name)
		}
	}
	return out
}

// listCompletion completes the last item of a comma-separated list among values, leaving out the
// items already given.
func listCompletion(toComplete string, values []string) []string {
	done, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	given := strings.Split(strings.TrimSuffix(done, ","), ",")
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, last) && !slices.Contains(given, v) {
			out = append(out, done+v)
		}
	}
	return out
}

// completeHosts completes one spec host name (with role when not "") per value, or a
// comma-separated list of them when list is set.
func completeHosts(role v1alpha1.Role, list bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		names := hostNames(completionSpec(cmd), role)
		if list {
			return listCompletion(toComplete, names), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeZones completes the spec's zones.
func completeZones(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c := completionSpec(cmd)
	if c == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var zones []string
	for _, h := range c.Spec.Hosts {
		if !slices.Contains(zones, h.Zone) {
			zones = append(zones, h.Zone)
		}
	}
	return zones, cobra.ShellCompDirectiveNoFileComp
}

// completeList completes a comma-separated list of fixed values (phase names, preflight checks).
func completeList(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return listCompletion(toComplete, values), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeSnapshots completes "latest" and the cluster's snapshots, newest first: their names
// (stems) when s3 is false, s3://BUCKET/KEY of their data objects when it is (restore --from,
// which also takes local files: those complete as files).
func completeSnapshots(s3 bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		dir := cobra.ShellCompDirectiveNoFileComp
		if s3 {
			dir = cobra.ShellCompDirectiveDefault // ./snap.db
		}
		if !s3 && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		if strings.HasPrefix("latest", toComplete) {
			out = append(out, "latest")
		}
		c := completionSpec(cmd)
		if c == nil || c.Spec.Backup == nil {
			return out, dir
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionStoreTimeout)
		defer cancel()
		st, err := backup.OpenStore(ctx, c, backup.StoreOptions{Getenv: os.Getenv})
		if err != nil {
			return out, dir
		}
		l, err := backup.ListCluster(ctx, st, c)
		if err != nil {
			return out, dir
		}
		for i := len(l.Snapshots) - 1; i >= 0; i-- {
			sn := l.Snapshots[i]
			v := sn.Stem
			if s3 {
				v = "s3://" + c.Spec.Backup.ObjectStore.Bucket + "/" + sn.Data.Key
			}
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, dir
	}
}
