package kops

// Fakes of AWS for the provider's tests: AWS cannot exist here. EC2 and
// ELB are an in-memory world kept in a JSON file (so the fake kops
// executable, another process, changes the same world), answering with
// the SDK's own types and AWS's shapes: pages of at most fakePageSize with
// NextToken, tag filters, instance and attachment states, and eventual
// consistency (a detached volume still reads in-use for a few calls, an
// attachment reads attaching for a few calls). S3 is gofakes3 in process,
// path-style, with bucket tagging added (gofakes3 lacks it).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fakePageSize is small so that every listing spans several pages.
const fakePageSize = 2

type fakeAttachment struct {
	Instance string `json:"instance"`
	State    string `json:"state"`
	// Lag is how many more reads the state is reported as Moving.
	Lag    int    `json:"lag,omitempty"`
	Moving string `json:"moving,omitempty"`
}

type fakeVolume struct {
	ID                  string            `json:"id"`
	Tags                map[string]string `json:"tags"`
	Attachments         []fakeAttachment  `json:"attachments,omitempty"`
	DeleteOnTermination bool              `json:"deleteOnTermination,omitempty"`
	// InUseLag: reads that still say in-use after the last detach.
	InUseLag int `json:"inUseLag,omitempty"`
}

type fakeInstance struct {
	ID, Type, State, PublicIP, PrivateIP, Zone string
	Tags                                       map[string]string
	Console                                    string
}

type fakeGroup struct {
	ID   string            `json:"id"`
	Tags map[string]string `json:"tags"`
	// UsedBy is an instance whose network interface holds the group.
	UsedBy string `json:"usedBy,omitempty"`
}

type fakeLB struct {
	ARN  string            `json:"arn"`
	Tags map[string]string `json:"tags"`
}

// fakeWorld is the EC2 and ELB state, and the fake kops's.
type fakeWorld struct {
	Instances []*fakeInstance `json:"instances"`
	Volumes   []*fakeVolume   `json:"volumes"`
	Groups    []*fakeGroup    `json:"groups"`
	LBs       []*fakeLB       `json:"lbs"`
	Next      int             `json:"next"`
	// The fake kops: clusters that exist, its calls, and its knobs.
	Clusters      map[string]bool `json:"clusters"`
	KopsCalls     [][]string      `json:"kopsCalls"`
	NotValidFor   int             `json:"notValidFor"`
	ValidateCalls int             `json:"validateCalls"`
	HangOnUpdate  bool            `json:"hangOnUpdate,omitempty"`
	KopsPID       int             `json:"kopsPID,omitempty"`
	// LeakOnDelete makes kops delete cluster leave the run's tagged PVC
	// volumes and one security group, as leaks in test accounts do.
	LeakOnDelete bool `json:"leakOnDelete,omitempty"`
	// SecretSeen is the fake kops reporting that the AWS secret reached
	// it (credentials pass through to kops).
	SecretSeen bool `json:"secretSeen,omitempty"`
	HostKey    string
}

// fakeStore is the world's file, locked for each change.
type fakeStore struct {
	path string
	mu   sync.Mutex
}

func (s *fakeStore) update(f func(w *fakeWorld) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lock, err := os.OpenFile(s.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	w := &fakeWorld{Clusters: map[string]bool{}}
	if b, err := os.ReadFile(s.path); err == nil {
		if err := json.Unmarshal(b, w); err != nil {
			return err
		}
	}
	ferr := f(w)
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.path, b, 0o600); err != nil {
		return err
	}
	return ferr
}

func (s *fakeStore) read(t *testing.T) *fakeWorld {
	t.Helper()
	var out *fakeWorld
	if err := s.update(func(w *fakeWorld) error { out = w; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func (w *fakeWorld) id(prefix string) string {
	w.Next++
	return fmt.Sprintf("%s-%08x", prefix, w.Next)
}

// fakeEC2 implements EC2 and LoadBalancers over the world.
type fakeEC2 struct{ s *fakeStore }

var (
	_ EC2           = fakeEC2{}
	_ LoadBalancers = fakeEC2{}
)

type apiError struct{ code, msg string }

func (e *apiError) Error() string     { return "api error " + e.code + ": " + e.msg }
func (e *apiError) ErrorCode() string { return e.code }

// page cuts items into AWS-style pages.
func page[T any](items []T, token *string) ([]T, *string) {
	start := 0
	if token != nil {
		start, _ = strconv.Atoi(*token)
	}
	end := min(start+fakePageSize, len(items))
	if end < len(items) {
		return items[start:end], aws.String(strconv.Itoa(end))
	}
	return items[start:end], nil
}

// matches applies EC2 filters: tag:K, tag-key, instance-state-name.
func matches(tags map[string]string, state string, filters []ec2types.Filter) bool {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		switch {
		case strings.HasPrefix(name, "tag:"):
			if !slices.Contains(f.Values, tags[strings.TrimPrefix(name, "tag:")]) {
				return false
			}
		case name == "tag-key":
			if !slices.ContainsFunc(f.Values, func(k string) bool { _, ok := tags[k]; return ok }) {
				return false
			}
		case name == "instance-state-name":
			if !slices.Contains(f.Values, state) {
				return false
			}
		}
	}
	return true
}

func toTags(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func (f fakeEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	var out ec2.DescribeInstancesOutput
	err := f.s.update(func(w *fakeWorld) error {
		var sel []ec2types.Instance
		for _, i := range w.Instances {
			if len(in.InstanceIds) > 0 && !slices.Contains(in.InstanceIds, i.ID) {
				continue
			}
			if i.State == "shutting-down" {
				// Terminated on the next read: AWS takes a while.
				defer func(i *fakeInstance) { i.State = "terminated" }(i)
			}
			if !matches(i.Tags, i.State, in.Filters) {
				continue
			}
			sel = append(sel, ec2types.Instance{InstanceId: aws.String(i.ID), InstanceType: ec2types.InstanceType(i.Type),
				State: &ec2types.InstanceState{Name: ec2types.InstanceStateName(i.State)}, PublicIpAddress: aws.String(i.PublicIP),
				PrivateIpAddress: aws.String(i.PrivateIP), Placement: &ec2types.Placement{AvailabilityZone: aws.String(i.Zone)}, Tags: toTags(i.Tags)})
		}
		items, next := page(sel, in.NextToken)
		for _, i := range items {
			out.Reservations = append(out.Reservations, ec2types.Reservation{Instances: []ec2types.Instance{i}})
		}
		out.NextToken = next
		return nil
	})
	return &out, err
}

func (f fakeEC2) DescribeVolumes(_ context.Context, in *ec2.DescribeVolumesInput, _ ...func(*ec2.Options)) (*ec2.DescribeVolumesOutput, error) {
	var out ec2.DescribeVolumesOutput
	err := f.s.update(func(w *fakeWorld) error {
		for _, id := range in.VolumeIds {
			if !slices.ContainsFunc(w.Volumes, func(v *fakeVolume) bool { return v.ID == id }) {
				return &apiError{"InvalidVolume.NotFound", "The volume '" + id + "' does not exist."}
			}
		}
		var sel []ec2types.Volume
		for _, v := range w.Volumes {
			if len(in.VolumeIds) > 0 && !slices.Contains(in.VolumeIds, v.ID) {
				continue
			}
			state := ec2types.VolumeStateAvailable
			var atts []ec2types.VolumeAttachment
			for i := range v.Attachments {
				a := &v.Attachments[i]
				st := a.State
				if a.Lag > 0 {
					st, a.Lag = a.Moving, a.Lag-1
				}
				atts = append(atts, ec2types.VolumeAttachment{InstanceId: aws.String(a.Instance), VolumeId: aws.String(v.ID), State: ec2types.VolumeAttachmentState(st)})
			}
			if len(atts) > 0 || v.InUseLag > 0 {
				state = ec2types.VolumeStateInUse
				if len(atts) == 0 {
					v.InUseLag--
				}
			}
			if !matches(v.Tags, "", in.Filters) {
				continue
			}
			sel = append(sel, ec2types.Volume{VolumeId: aws.String(v.ID), State: state, Attachments: atts, Tags: toTags(v.Tags)})
		}
		out.Volumes, out.NextToken = page(sel, in.NextToken)
		return nil
	})
	return &out, err
}

func (f fakeEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	var out ec2.DescribeSecurityGroupsOutput
	err := f.s.update(func(w *fakeWorld) error {
		var sel []ec2types.SecurityGroup
		for _, g := range w.Groups {
			sel = append(sel, ec2types.SecurityGroup{GroupId: aws.String(g.ID), Tags: toTags(g.Tags)})
		}
		out.SecurityGroups, out.NextToken = page(sel, in.NextToken)
		return nil
	})
	return &out, err
}

// terminate is what EC2 does when an instance goes: root volumes deleted,
// other volumes detached (in-use for two more reads), groups released.
func (w *fakeWorld) terminate(id string) {
	for _, i := range w.Instances {
		if i.ID == id && i.State != "terminated" {
			i.State = "shutting-down"
		}
	}
	w.Volumes = slices.DeleteFunc(w.Volumes, func(v *fakeVolume) bool {
		return v.DeleteOnTermination && slices.ContainsFunc(v.Attachments, func(a fakeAttachment) bool { return a.Instance == id })
	})
	for _, v := range w.Volumes {
		n := len(v.Attachments)
		v.Attachments = slices.DeleteFunc(v.Attachments, func(a fakeAttachment) bool { return a.Instance == id })
		if len(v.Attachments) < n {
			v.InUseLag = 2
		}
	}
	for _, g := range w.Groups {
		if g.UsedBy == id {
			g.UsedBy = ""
		}
	}
}

func (f fakeEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return &ec2.TerminateInstancesOutput{}, f.s.update(func(w *fakeWorld) error {
		for _, id := range in.InstanceIds {
			w.terminate(id)
		}
		return nil
	})
}

func (f fakeEC2) DeleteVolume(_ context.Context, in *ec2.DeleteVolumeInput, _ ...func(*ec2.Options)) (*ec2.DeleteVolumeOutput, error) {
	return &ec2.DeleteVolumeOutput{}, f.s.update(func(w *fakeWorld) error {
		id := aws.ToString(in.VolumeId)
		i := slices.IndexFunc(w.Volumes, func(v *fakeVolume) bool { return v.ID == id })
		if i < 0 {
			return &apiError{"InvalidVolume.NotFound", id}
		}
		if len(w.Volumes[i].Attachments) > 0 || w.Volumes[i].InUseLag > 0 {
			return &apiError{"VolumeInUse", "Volume " + id + " is currently attached"}
		}
		w.Volumes = slices.Delete(w.Volumes, i, i+1)
		return nil
	})
}

func (f fakeEC2) DeleteSecurityGroup(_ context.Context, in *ec2.DeleteSecurityGroupInput, _ ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error) {
	return &ec2.DeleteSecurityGroupOutput{}, f.s.update(func(w *fakeWorld) error {
		id := aws.ToString(in.GroupId)
		i := slices.IndexFunc(w.Groups, func(g *fakeGroup) bool { return g.ID == id })
		if i < 0 {
			return &apiError{"InvalidGroup.NotFound", id}
		}
		if w.Groups[i].UsedBy != "" {
			return &apiError{"DependencyViolation", "resource " + id + " has a dependent object"}
		}
		w.Groups = slices.Delete(w.Groups, i, i+1)
		return nil
	})
}

func (f fakeEC2) GetConsoleOutput(_ context.Context, in *ec2.GetConsoleOutputInput, _ ...func(*ec2.Options)) (*ec2.GetConsoleOutputOutput, error) {
	var out ec2.GetConsoleOutputOutput
	err := f.s.update(func(w *fakeWorld) error {
		for _, i := range w.Instances {
			if i.ID == aws.ToString(in.InstanceId) {
				out.Output = aws.String(base64.StdEncoding.EncodeToString([]byte(i.Console)))
				return nil
			}
		}
		return &apiError{"InvalidInstanceID.NotFound", aws.ToString(in.InstanceId)}
	})
	return &out, err
}

func (f fakeEC2) DescribeLoadBalancers(_ context.Context, in *elb.DescribeLoadBalancersInput, _ ...func(*elb.Options)) (*elb.DescribeLoadBalancersOutput, error) {
	var out elb.DescribeLoadBalancersOutput
	err := f.s.update(func(w *fakeWorld) error {
		var sel []elbtypes.LoadBalancer
		for _, lb := range w.LBs {
			sel = append(sel, elbtypes.LoadBalancer{LoadBalancerArn: aws.String(lb.ARN)})
		}
		out.LoadBalancers, out.NextMarker = page(sel, in.Marker)
		return nil
	})
	return &out, err
}

func (f fakeEC2) DescribeTags(_ context.Context, in *elb.DescribeTagsInput, _ ...func(*elb.Options)) (*elb.DescribeTagsOutput, error) {
	var out elb.DescribeTagsOutput
	err := f.s.update(func(w *fakeWorld) error {
		if len(in.ResourceArns) > 20 {
			return &apiError{"ValidationError", "at most 20 ARNs"}
		}
		for _, lb := range w.LBs {
			if slices.Contains(in.ResourceArns, lb.ARN) {
				d := elbtypes.TagDescription{ResourceArn: aws.String(lb.ARN)}
				for _, k := range sortedKeys(lb.Tags) {
					d.Tags = append(d.Tags, elbtypes.Tag{Key: aws.String(k), Value: aws.String(lb.Tags[k])})
				}
				out.TagDescriptions = append(out.TagDescriptions, d)
			}
		}
		return nil
	})
	return &out, err
}

func (f fakeEC2) DeleteLoadBalancer(_ context.Context, in *elb.DeleteLoadBalancerInput, _ ...func(*elb.Options)) (*elb.DeleteLoadBalancerOutput, error) {
	return &elb.DeleteLoadBalancerOutput{}, f.s.update(func(w *fakeWorld) error {
		w.LBs = slices.DeleteFunc(w.LBs, func(lb *fakeLB) bool { return lb.ARN == aws.ToString(in.LoadBalancerArn) })
		return nil
	})
}

// fakeS3 is gofakes3 in process, path-style, with bucket tagging added.
func fakeS3(t *testing.T) *s3.Client {
	t.Helper()
	faker := gofakes3.New(s3mem.New())
	inner := faker.Server()
	var mu sync.Mutex
	tags := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket := strings.Trim(r.URL.Path, "/")
		if r.URL.Query().Has("tagging") && !strings.Contains(bucket, "/") {
			mu.Lock()
			defer mu.Unlock()
			switch r.Method {
			case http.MethodPut:
				b, _ := io.ReadAll(r.Body)
				var tg struct{ XMLName xml.Name }
				if err := xml.Unmarshal(b, &tg); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				tags[bucket] = b
				return
			case http.MethodGet:
				b, ok := tags[bucket]
				if !ok {
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchTagSet</Code><Message>The TagSet does not exist</Message></Error>`)
					return
				}
				w.Write(b)
				return
			}
		}
		if r.Method == http.MethodDelete && !strings.Contains(bucket, "/") && r.URL.RawQuery == "" {
			mu.Lock()
			delete(tags, bucket)
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("fake-access-key", "fake-secret-key", "")})
}

// fakeClients are the fakes as the provider's Clients.
func fakeClients(t *testing.T, store *fakeStore) *Clients {
	return &Clients{EC2: fakeEC2{store}, ELB: fakeEC2{store}, S3: fakeS3(t), Region: "us-east-1", Poll: 5e6}
}

var errFake = errors.New("fake")
