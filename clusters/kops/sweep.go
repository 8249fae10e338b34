package kops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// sweepTimeout bounds the sweep after kops delete cluster: terminated
// instances release their volumes and security groups within minutes.
const sweepTimeout = 15 * time.Minute

// resource is one AWS resource found by its tags.
type resource struct {
	Kind  string            `json:"kind"` // instance, volume, security-group, load-balancer, bucket
	ID    string            `json:"id"`
	State string            `json:"state,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
	// Deleted says the sweep or the janitor deleted it; Err why not.
	Deleted bool   `json:"deleted,omitempty"`
	Err     string `json:"error,omitempty"`
}

func (r resource) String() string {
	s := r.Kind + " " + r.ID
	if r.State != "" {
		s += " (" + r.State + ")"
	}
	if exp := r.Tags[tagExpiry]; exp != "" {
		s += " expires " + exp
	}
	if r.Err != "" {
		s += ": " + r.Err
	}
	return s
}

// match selects resources by their tags.
type match func(tags map[string]string) bool

// runMatch is a run's resources: its run-ID tag, or kops's cluster tag
// for its cluster (what the EBS CSI driver tags PVC volumes with).
func runMatch(runID, cluster string) match {
	return func(t map[string]string) bool { return t[tagRunID] == runID || t[tagCluster] == cluster }
}

// list finds every resource of the kinds the provider makes whose tags
// match: instances (not terminated), volumes, security groups, load
// balancers, and buckets named skewtest-kops-*.
func list(ctx context.Context, c *awsClients, m match) ([]resource, error) {
	var out []resource
	var errs []error
	pi := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}})
	for pi.HasMorePages() {
		page, err := pi.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("describe instances: %w", err))
			break
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if t := ec2Tags(i.Tags); m(t) {
					out = append(out, resource{Kind: "instance", ID: aws.ToString(i.InstanceId), State: stateName(i.State), Tags: t})
				}
			}
		}
	}
	pv := ec2.NewDescribeVolumesPaginator(c.EC2, &ec2.DescribeVolumesInput{})
	for pv.HasMorePages() {
		page, err := pv.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("describe volumes: %w", err))
			break
		}
		for _, v := range page.Volumes {
			if t := ec2Tags(v.Tags); m(t) {
				out = append(out, resource{Kind: "volume", ID: aws.ToString(v.VolumeId), State: string(v.State), Tags: t})
			}
		}
	}
	ps := ec2.NewDescribeSecurityGroupsPaginator(c.EC2, &ec2.DescribeSecurityGroupsInput{})
	for ps.HasMorePages() {
		page, err := ps.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("describe security groups: %w", err))
			break
		}
		for _, g := range page.SecurityGroups {
			if t := ec2Tags(g.Tags); m(t) {
				out = append(out, resource{Kind: "security-group", ID: aws.ToString(g.GroupId), Tags: t})
			}
		}
	}
	if c.ELB != nil {
		lbs, err := listLoadBalancers(ctx, c.ELB, m)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, lbs...)
	}
	if c.S3 != nil {
		buckets, err := c.S3.ListBuckets(ctx, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("list buckets: %w", err))
		} else {
			for _, b := range buckets.Buckets {
				name := aws.ToString(b.Name)
				if !strings.HasPrefix(name, bucketPrefix) {
					continue
				}
				t, err := bucketTags(ctx, c.S3, name)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if m(t) {
					out = append(out, resource{Kind: "bucket", ID: name, Tags: t})
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

func listLoadBalancers(ctx context.Context, c elbAPI, m match) ([]resource, error) {
	var out []resource
	pg := elb.NewDescribeLoadBalancersPaginator(c, &elb.DescribeLoadBalancersInput{})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return out, fmt.Errorf("describe load balancers: %w", err)
		}
		var arns []string
		for _, lb := range page.LoadBalancers {
			arns = append(arns, aws.ToString(lb.LoadBalancerArn))
		}
		// DescribeTags takes at most 20 ARNs.
		for len(arns) > 0 {
			n := min(len(arns), 20)
			tags, err := c.DescribeTags(ctx, &elb.DescribeTagsInput{ResourceArns: arns[:n]})
			if err != nil {
				return out, fmt.Errorf("describe load balancer tags: %w", err)
			}
			for _, d := range tags.TagDescriptions {
				t := map[string]string{}
				for _, tag := range d.Tags {
					t[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				if m(t) {
					out = append(out, resource{Kind: "load-balancer", ID: aws.ToString(d.ResourceArn), Tags: t})
				}
			}
			arns = arns[n:]
		}
	}
	return out, nil
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	t := make(map[string]string, len(tags))
	for _, tag := range tags {
		t[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	return t
}

func stateName(s *ec2types.InstanceState) string {
	if s == nil {
		return ""
	}
	return string(s.Name)
}

// deleteOrder is the order resources can go in: instances first (they
// hold volumes, security groups and load balancer targets), then load
// balancers (they hold security groups), volumes once detached, security
// groups, buckets.
var deleteOrder = []string{"instance", "load-balancer", "volume", "security-group", "bucket"}

// remove deletes rs in deleteOrder, waiting (until ctx's deadline) for a
// volume still in-use to become available and for a security group still
// in use to be free, as EC2 lets go of them some time after an instance
// terminates. It marks each resource Deleted or with its Err.
func remove(ctx context.Context, c *awsClients, rs []resource) error {
	var errs []error
	for _, kind := range deleteOrder {
		for i := range rs {
			r := &rs[i]
			if r.Kind != kind {
				continue
			}
			err := removeOne(ctx, c, r)
			if err != nil {
				r.Err = err.Error()
				errs = append(errs, fmt.Errorf("%s %s: %w", r.Kind, r.ID, err))
			} else {
				r.Deleted = true
			}
		}
	}
	return errors.Join(errs...)
}

func removeOne(ctx context.Context, c *awsClients, r *resource) error {
	switch r.Kind {
	case "instance":
		if _, err := c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{r.ID}}); err != nil {
			return err
		}
		return retry(ctx, c, func() (bool, error) {
			out, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{r.ID}})
			if err != nil {
				return false, err
			}
			for _, res := range out.Reservations {
				for _, i := range res.Instances {
					if stateName(i.State) != string(ec2types.InstanceStateNameTerminated) {
						return false, nil
					}
				}
			}
			return true, nil
		})
	case "load-balancer":
		_, err := c.ELB.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(r.ID)})
		return err
	case "volume":
		// A volume of a terminating instance reads in-use for a while.
		return retry(ctx, c, func() (bool, error) {
			out, err := c.EC2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{r.ID}})
			if err != nil {
				if strings.Contains(err.Error(), "InvalidVolume.NotFound") {
					return true, nil
				}
				return false, err
			}
			for _, v := range out.Volumes {
				if v.State == ec2types.VolumeStateInUse {
					r.State = string(v.State)
					return false, nil
				}
			}
			_, err = c.EC2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(r.ID)})
			return err == nil, err
		})
	case "security-group":
		return retry(ctx, c, func() (bool, error) {
			_, err := c.EC2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(r.ID)})
			if err != nil && strings.Contains(err.Error(), "DependencyViolation") {
				return false, nil
			}
			return err == nil, err
		})
	case "bucket":
		return deleteBucket(ctx, c.S3, r.ID)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

// retry calls f every c.poll() until it is done, fails, or ctx ends.
func retry(ctx context.Context, c *awsClients, f func() (bool, error)) error {
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still not gone: %w", context.Cause(ctx))
		case <-time.After(c.poll()):
		}
	}
}

// Sweep finds what still carries the run's tags after kops delete cluster
// (or a failed Up) and deletes it, and returns what it found, each marked
// deleted or with why not.
func (p *provider) Sweep(ctx context.Context) ([]resource, error) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	found, err := list(ctx, p.clients, runMatch(p.cfg.RunID, p.cfg.ClusterName()))
	if err != nil {
		return found, fmt.Errorf("kops: sweep: %w", err)
	}
	if len(found) == 0 {
		p.log.Info("sweep: nothing carries the run's tags")
		return nil, nil
	}
	p.log.Warn("sweep: resources still carry the run's tags after Down; deleting them", "count", len(found))
	err = remove(ctx, p.clients, found)
	for _, r := range found {
		p.log.Info("sweep", "resource", r.String(), "deleted", r.Deleted)
	}
	if err != nil {
		return found, fmt.Errorf("kops: sweep: %w", err)
	}
	return found, nil
}
