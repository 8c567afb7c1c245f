package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AlarmError is a request etcd refused because an alarm is active: NOSPACE (the database reached
// its quota, "etcdserver: mvcc: database space exceeded": writes are refused until the alarm is
// disarmed) or CORRUPT (a member's data differs from the others'). It names the alarms, the members
// that raised them, and the command that clears them; Unwrap gives etcd's error.
type AlarmError struct {
	// Alarms are the active alarms, e.g. "NOSPACE on member 8e9e05c52164694d" (empty when they could
	// not be listed: the kind then comes from etcd's error).
	Alarms []string
	// NoSpace and Corrupt say which kinds are active.
	NoSpace, Corrupt bool
	Err              error
}

func (e *AlarmError) Error() string {
	var b strings.Builder
	active := "alarm"
	if len(e.Alarms) > 0 {
		active = strings.Join(e.Alarms, ", ")
	} else if e.NoSpace {
		active = "NOSPACE"
	} else if e.Corrupt {
		active = "CORRUPT"
	}
	fmt.Fprintf(&b, "%v: etcd refuses the request while an alarm is active (%s)", e.Err, active)
	if e.NoSpace {
		b.WriteString("; NOSPACE: the database reached spec.etcd.quotaBackendBytes. Clear it with `hactl etcd alarm disarm -f cluster.yaml --yes` " +
			"(compacts the history, defragments every member, then disarms); if the data itself exceeds the quota, raise spec.etcd.quotaBackendBytes and run bootstrap")
	}
	if e.Corrupt {
		b.WriteString("; CORRUPT: a member's data differs from the others' and hactl never disarms it: `hactl etcd alarm list -f cluster.yaml` names the member; " +
			"replace it (`hactl etcd member replace`) or restore from a backup (`hactl restore`)")
	}
	return b.String()
}

func (e *AlarmError) Unwrap() error { return e.Err }

// alarmListTimeout bounds the alarm list ExplainAlarm asks for.
const alarmListTimeout = 5 * time.Second

// ExplainAlarm returns err as an *AlarmError when it is etcd refusing a request because of an
// alarm (NOSPACE, CORRUPT), with the active alarms listed through cli (bounded by 5 s, within
// ctx); any other error, and nil, are returned unchanged.
func ExplainAlarm(ctx context.Context, cli *clientv3.Client, err error) error {
	if err == nil {
		return nil
	}
	var ae *AlarmError
	if errors.As(err, &ae) {
		return err
	}
	msg := err.Error()
	e := &AlarmError{Err: err,
		NoSpace: errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) || strings.Contains(msg, rpctypes.ErrNoSpace.Error()),
		Corrupt: errors.Is(err, rpctypes.ErrCorrupt) || errors.Is(err, rpctypes.ErrGRPCCorrupt) || strings.Contains(msg, rpctypes.ErrCorrupt.Error())}
	if !e.NoSpace && !e.Corrupt {
		return err
	}
	if cli != nil && ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, alarmListTimeout)
		defer cancel()
		if resp, lerr := cli.AlarmList(actx); lerr == nil {
			for _, a := range resp.Alarms {
				e.Alarms = append(e.Alarms, fmt.Sprintf("%s on member %x", a.Alarm, a.MemberID))
				e.NoSpace = e.NoSpace || a.Alarm.String() == "NOSPACE"
				e.Corrupt = e.Corrupt || a.Alarm.String() == "CORRUPT"
			}
			slices.Sort(e.Alarms)
		}
	}
	return e
}
