// Package cgroups is skewtest's one place that reads and changes the host's
// cgroups: which layout the host has (Mode: unified cgroup v2, hybrid or
// legacy v1) and which init system (systemd or not), the cgroup root a
// local kubelet runs its pods under, and the teardown that kills what is
// left in a run's cgroups and removes them, deepest first.
//
// On a unified host a run owns one cgroup (see Tree.MakeRoot): its daemons
// live in a leaf beneath it and each node's kubelet gets a cgroup root
// beside that leaf, with the controllers the kubelet needs enabled in
// cgroup.subtree_control from the top of the hierarchy down. cgroup v2 lets
// only leaves hold processes once controllers are enabled below a cgroup,
// so nothing of the run sits in an inner cgroup. Where systemd is PID 1 the
// run's cgroup is a transient scope unit with Delegate=yes (ScopeCommand),
// which is how systemd's cgroup delegation rules let a program own a
// subtree: systemd leaves a delegated unit's subtree to its owner and never
// creates, moves or prunes cgroups inside it. Without systemd nothing else
// manages the hierarchy and the run's cgroup sits at its top.
//
// On hybrid and legacy v1 hosts a cgroup root is made in every mounted
// hierarchy (MakeV1Root), as the kubelet's cgroupfs driver looks for it in
// each.
package cgroups
