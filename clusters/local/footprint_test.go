package local

import (
	"strings"
	"testing"
)

func TestFootprintAdded(t *testing.T) {
	before := Footprint{Processes: []string{"containerd(10)"}, Chains: []string{"iptables|filter|KUBE-FIREWALL"}}
	tests := []struct {
		name  string
		after Footprint
		want  []string
	}{
		{"same", Footprint{Processes: []string{"containerd(99)"}, Chains: []string{"iptables|filter|KUBE-FIREWALL"}}, nil},
		{"leaked kubelet and mount", Footprint{
			Processes: []string{"containerd(10)", "kubelet(42)"},
			Chains:    []string{"iptables|filter|KUBE-FIREWALL"},
			Mounts:    []string{"/var/lib/skewtest/r/kubelet"},
		}, []string{"process kubelet(42)", "mount /var/lib/skewtest/r/kubelet"}},
		{"second containerd", Footprint{Processes: []string{"containerd(10)", "containerd(11)"}, Chains: []string{"iptables|filter|KUBE-FIREWALL"}}, []string{"process containerd(11)"}},
		{"removed is not added", Footprint{}, nil},
		{"a table the kernel made on first use, with default policies", Footprint{
			Processes: []string{"containerd(10)"},
			Chains:    []string{"iptables|filter|KUBE-FIREWALL", "iptables|mangle|FORWARD policy ACCEPT", "ip6tables|nat|INPUT policy ACCEPT"},
		}, nil},
		{"a new table with a chain or a DROP policy", Footprint{
			Processes: []string{"containerd(10)"},
			Chains:    []string{"iptables|filter|KUBE-FIREWALL", "iptables|mangle|KUBE-KUBELET-CANARY", "iptables|raw|PREROUTING policy DROP"},
		}, []string{"iptables chain iptables|mangle|KUBE-KUBELET-CANARY", "iptables chain iptables|raw|PREROUTING policy DROP"}},
		{"a known table's policy turned to ACCEPT", Footprint{
			Processes: []string{"containerd(10)"},
			Chains:    []string{"iptables|filter|KUBE-FIREWALL", "iptables|filter|FORWARD policy ACCEPT"},
		}, []string{"iptables chain iptables|filter|FORWARD policy ACCEPT"}},
		{"kubelet serving cert on the host", Footprint{
			Processes:        []string{"containerd(10)"},
			Chains:           []string{"iptables|filter|KUBE-FIREWALL"},
			HostKubeletFiles: []string{"/var/lib/kubelet/pki/kubelet.crt"},
		}, []string{"host kubelet file /var/lib/kubelet/pki/kubelet.crt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := before.Added(tt.after)
			if strings.Join(got, ";") != strings.Join(tt.want, ";") {
				t.Fatalf("Added() = %q, want %q", got, tt.want)
			}
		})
	}
}
