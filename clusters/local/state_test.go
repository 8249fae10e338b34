package local

import (
	"reflect"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := state{
		Nodes:            []nodeState{layoutOf(dir, 0).state(testRunID), layoutOf(dir, 1).state(testRunID)},
		IPTablesBefore:   []string{"iptables|filter|INPUT"},
		IPTablesRecorded: true,
	}
	if err := writeState(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readState = %+v, want %+v", got, want)
	}
}

// A run killed before clusters had several nodes kept its one node's
// names at the top level; `skewtest clean` must still find them.
func TestParseStateOfSingleNodeRun(t *testing.T) {
	got, err := parseState([]byte(`{"cgroupRoot": "/skewtest-1a2b", "bridge": "skw1a2b", "cniNetwork": "skewtest-1a2b",
		"iptablesBefore": null, "iptablesRecorded": true, "containerdRunDirExisted": false}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []nodeState{{Name: NodeName, CgroupRoot: "/skewtest-1a2b", Bridge: "skw1a2b", CNINetwork: "skewtest-1a2b"}}
	if !reflect.DeepEqual(got.Nodes, want) || !got.IPTablesRecorded {
		t.Errorf("parseState = %+v, want nodes %+v and iptables recorded", got, want)
	}
	empty, err := parseState([]byte(`{"iptablesRecorded": false}`))
	if err != nil || len(empty.Nodes) != 0 {
		t.Errorf("parseState of a state with no node = %+v, %v; want no nodes", empty, err)
	}
}
