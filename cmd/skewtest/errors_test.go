package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// A clean refused because the kubeconfig points at another cluster exits
// 2 and says it is bad input, not an infrastructure failure; a clean that
// failed is infrastructure.
func TestInfrastructureKeepsBadInputBad(t *testing.T) {
	refused := infrastructure(fmt.Errorf("existing: clean /var/lib/skewtest/x: %w: point the kubeconfig back", workloads.ErrOtherCluster))
	if exitcode.Of(refused) != exitcode.Invalid || !strings.HasPrefix(refused.Error(), exitcode.ErrInvalid.Error()+":") {
		t.Errorf("refused clean: exit %d, %q; want %d and a message that starts %q", exitcode.Of(refused), refused, exitcode.Invalid, exitcode.ErrInvalid)
	}
	failed := infrastructure(errors.New("unmount /var/lib/skewtest/x/kubelet: device busy"))
	if exitcode.Of(failed) != exitcode.Infrastructure || !strings.HasPrefix(failed.Error(), exitcode.ErrInfrastructure.Error()+":") {
		t.Errorf("failed clean: exit %d, %q; want %d", exitcode.Of(failed), failed, exitcode.Infrastructure)
	}
	if infrastructure(nil) != nil {
		t.Error("infrastructure(nil) is not nil")
	}
}
