// Package probe measures a load-balancer failover from the outside, for `hactl drill lb-failover`:
// what a client of the kube-apiserver VIP sees, and where the VIP sits.
//
//   - [StartReadyz] sends GET /readyz to the VIP on a fresh TCP+TLS connection every 20 ms (open
//     loop) and records every outcome as a [Sample]; [Outage] turns the samples and the instant
//     the fault was injected (t0) into the figures of the drill ([OutageStats]).
//   - [WatchVIP] runs [WatchScript] on one LB host over SSH and records, with local receive
//     times, when the host gains or loses the VIP ([VIPEvent]); [Holders], [FirstMove] and
//     [WaitMove] answer "who holds the VIP" over the events of all LB hosts.
//
// What to expect (RFC 5798, VRRPv3, which keepalived implements): stopping keepalived on the
// master makes it send an advertisement with priority 0 (§6.4.3, Shutdown event), upon which a
// backup sets its Master_Down_Timer to Skew_Time (§6.4.2) and becomes master within
// (256-priority)/256 advertisement intervals (§6.1). Stopping HAProxy instead fails keepalived's
// tracked check, which lowers the master's priority by the check's weight; a preempting backup of
// higher priority then discards the master's advertisements (§6.4.2), takes over when its
// Master_Down_Timer expires (Master_Down_Interval = 3 × Master_Adver_Interval + Skew_Time,
// §6.1), and the old master steps down on the new master's first advertisement (§6.4.3). Until
// then both hosts may hold the VIP, so [Holders] can name two hosts for a short while.
//
// Nothing here decides pass or fail: the drill compares the figures with its goals.
package probe
