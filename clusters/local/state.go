package local

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// state is what teardown needs to know about a run beyond what it can find
// under the run directory; it is written before the thing it describes is
// made, so a run killed half-way can still be cleaned by `skewtest clean`.
type state struct {
	// CgroupRoot is the kubelet's cgroupRoot, e.g. /skewtest-abcd.
	CgroupRoot string `json:"cgroupRoot"`
	// Bridge is the CNI bridge interface this run's pods use.
	Bridge string `json:"bridge"`
	// CNINetwork is the CNI network name (prefix of /var/lib/cni entries).
	CNINetwork string `json:"cniNetwork"`
	// IPTablesBefore lists "iptables|table|chain" that existed before the
	// kubelet ran; teardown removes the KUBE-* chains that did not.
	IPTablesBefore []string `json:"iptablesBefore"`
	// IPTablesRecorded is set once IPTablesBefore was taken (it may be
	// empty); without it teardown leaves iptables alone.
	IPTablesRecorded bool `json:"iptablesRecorded"`
	// ContainerdRunDirExisted tells whether /run/containerd existed before
	// the run (shims put their sockets in /run/containerd/s).
	ContainerdRunDirExisted bool `json:"containerdRunDirExisted"`
}

const stateFile = "state.json"

func writeState(dir string, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
