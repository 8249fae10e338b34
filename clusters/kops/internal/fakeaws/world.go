// Package fakeaws is a fake of the parts of AWS, and of the kops CLI, that
// the kops provider (clusters/kops) uses. AWS and a kops binary cannot
// exist on skewtest's test machines, so the provider's tests and make
// test-hosts reach these fakes the way the real ones are reached: the
// AWS SDK's endpoint settings (AWS_ENDPOINT_URL, or a client's
// BaseEndpoint) point at Handler, which answers EC2 and Elastic Load
// Balancing v2 in their query protocols and S3 in its REST one
// (gofakes3), and an executable named kops on PATH runs Kops.
//
// EC2 and ELB are an in-memory world kept in a JSON file (World, Store),
// so that the fake kops, another process, changes the same world. They
// answer in AWS's shapes: pages of at most PageSize with NextToken, tag
// filters, instance and attachment states, and eventual consistency (a
// detached volume still reads in-use for a few calls, an attachment reads
// attaching for a few calls). Nothing here is used outside tests.
package fakeaws

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

// PageSize is small so that every listing spans several pages.
const PageSize = 2

// Attachment is a volume's attachment to an instance.
type Attachment struct {
	Instance string `json:"instance"`
	State    string `json:"state"`
	// Lag is how many more reads the state is reported as Moving.
	Lag    int    `json:"lag,omitempty"`
	Moving string `json:"moving,omitempty"`
}

// Volume is an EBS volume.
type Volume struct {
	ID                  string            `json:"id"`
	Tags                map[string]string `json:"tags"`
	Attachments         []Attachment      `json:"attachments,omitempty"`
	DeleteOnTermination bool              `json:"deleteOnTermination,omitempty"`
	// InUseLag: reads that still say in-use after the last detach.
	InUseLag int `json:"inUseLag,omitempty"`
}

// Instance is an EC2 instance; Console is its console output, plain.
type Instance struct {
	ID, Type, State, PublicIP, PrivateIP, Zone string
	Tags                                       map[string]string
	Console                                    string
}

// Group is a security group.
type Group struct {
	ID   string            `json:"id"`
	Tags map[string]string `json:"tags"`
	// UsedBy is an instance whose network interface holds the group.
	UsedBy string `json:"usedBy,omitempty"`
}

// LB is a network load balancer.
type LB struct {
	ARN  string            `json:"arn"`
	Tags map[string]string `json:"tags"`
}

// Node makes the fake kops's worker a real machine: kops update cluster
// makes the worker instance with these addresses and console, installs
// the run's SSH public key in AuthorizedKeys as cloud-init would, and
// writes Kubeconfig's contents as the admin kubeconfig; kops delete
// cluster takes the key out again. Without a Node the worker is made up.
type Node struct {
	PublicIP  string `json:"publicIP"`
	PrivateIP string `json:"privateIP"`
	// HostKeys are the machine's SSH host public keys, authorized_keys
	// lines, printed on the console between cloud-init's markers.
	HostKeys       []string `json:"hostKeys"`
	SSHUser        string   `json:"sshUser"`
	AuthorizedKeys string   `json:"authorizedKeys"`
	Kubeconfig     string   `json:"kubeconfig"`
}

// World is the EC2 and ELB state, and the fake kops's.
type World struct {
	Instances []*Instance `json:"instances"`
	Volumes   []*Volume   `json:"volumes"`
	Groups    []*Group    `json:"groups"`
	LBs       []*LB       `json:"lbs"`
	Next      int         `json:"next"`
	Node      *Node       `json:"node,omitempty"`
	// The fake kops: clusters that exist, its calls, and its knobs.
	Clusters      map[string]bool `json:"clusters"`
	KopsCalls     [][]string      `json:"kopsCalls"`
	NotValidFor   int             `json:"notValidFor"`
	ValidateCalls int             `json:"validateCalls"`
	HangOnUpdate  bool            `json:"hangOnUpdate,omitempty"`
	// UpdatedAt is when update cluster made each cluster's instances:
	// with a Node, delete cluster removes the API objects made since.
	UpdatedAt map[string]time.Time `json:"updatedAt,omitempty"`
	KopsPID   int                  `json:"kopsPID,omitempty"`
	// LeakOnDelete makes kops delete cluster leave the run's tagged PVC
	// volumes and one security group, as leaks in test accounts do.
	LeakOnDelete bool `json:"leakOnDelete,omitempty"`
	// SecretSeen is the fake kops reporting that the AWS secret reached
	// it (credentials pass through to kops).
	SecretSeen bool `json:"secretSeen,omitempty"`
	// Calls counts the API calls by service and action, e.g.
	// "ec2 DescribeInstances".
	Calls map[string]int `json:"calls,omitempty"`
	// HostKey is the made-up worker's host key, when there is no Node.
	HostKey string
}

// ID is a new resource ID with prefix (i, vol, sg, lb).
func (w *World) ID(prefix string) string {
	w.Next++
	return fmt.Sprintf("%s-%08x", prefix, w.Next)
}

// Store is the world's file, locked for each change across processes.
type Store struct {
	Path string
	mu   sync.Mutex
}

// Update reads the world, applies f, and writes it back whatever f
// returned; f's error is returned.
func (s *Store) Update(f func(w *World) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lock, err := os.OpenFile(s.Path+".lock", os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	w := &World{Clusters: map[string]bool{}}
	if b, err := os.ReadFile(s.Path); err == nil {
		if err := json.Unmarshal(b, w); err != nil {
			return err
		}
	}
	if w.Clusters == nil {
		w.Clusters = map[string]bool{}
	}
	ferr := f(w)
	b, err := json.MarshalIndent(w, "", " ")
	if err != nil {
		return err
	}
	tmp := s.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.Path); err != nil {
		return err
	}
	return ferr
}

// Read is the world as it is now.
func (s *Store) Read() (*World, error) {
	var out *World
	err := s.Update(func(w *World) error { out = w; return nil })
	return out, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
