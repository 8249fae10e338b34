package kops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

// ec2API is the part of the EC2 API the provider calls, so that tests can put
// an in-memory fake behind it (ec2.Client implements it). Paginated calls
// are made through the SDK's paginators, which need only these methods.
type ec2API interface {
	ec2.DescribeInstancesAPIClient
	ec2.DescribeVolumesAPIClient
	ec2.DescribeSecurityGroupsAPIClient
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DeleteVolume(ctx context.Context, in *ec2.DeleteVolumeInput, opts ...func(*ec2.Options)) (*ec2.DeleteVolumeOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error)
	GetConsoleOutput(ctx context.Context, in *ec2.GetConsoleOutputInput, opts ...func(*ec2.Options)) (*ec2.GetConsoleOutputOutput, error)
}

// elbAPI is the part of the Elastic Load Balancing v2 API the sweep
// calls (kops fronts the API server with a network load balancer).
type elbAPI interface {
	elb.DescribeLoadBalancersAPIClient
	DescribeTags(ctx context.Context, in *elb.DescribeTagsInput, opts ...func(*elb.Options)) (*elb.DescribeTagsOutput, error)
	DeleteLoadBalancer(ctx context.Context, in *elb.DeleteLoadBalancerInput, opts ...func(*elb.Options)) (*elb.DeleteLoadBalancerOutput, error)
}

// awsClients are the AWS APIs the provider uses. S3 is the SDK's own client:
// tests point it at an in-process S3 fake (gofakes3) by endpoint.
type awsClients struct {
	EC2    ec2API
	ELB    elbAPI
	S3     *s3.Client
	Region string
	// Poll is how often EC2 is asked again while waiting for it to catch
	// up; zero means awsPoll. Tests against fakes shorten it.
	Poll time.Duration
}

func (c *awsClients) poll() time.Duration {
	if c.Poll > 0 {
		return c.Poll
	}
	return awsPoll
}

// credentialsTimeout bounds the credential chain's lookup during
// validation: on a machine outside EC2 the chain's last link, the instance
// metadata service, would otherwise take its own retries to give up.
const credentialsTimeout = 5 * time.Second

// errNoCredentials is the default chain finding nothing.
var errNoCredentials = errors.New("no AWS credentials")

// loadAWS reads the SDK's default configuration (environment, shared
// files, SSO, container and instance roles: the default chain only) for
// region, and checks that it yields credentials. The credentials are never
// copied anywhere: only the SDK holds them.
func loadAWS(ctx context.Context, region string, httpClient *http.Client) (aws.Config, error) {
	// The SDK's own warnings (IMDS fallbacks off EC2) would only confuse
	// the error that names what is missing.
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region), awsconfig.WithLogger(logging.Nop{})}
	if httpClient != nil {
		opts = append(opts, awsconfig.WithHTTPClient(httpClient))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return aws.Config{}, fmt.Errorf("%w: the SDK's default chain found none (%v)", errNoCredentials, err)
	}
	return cfg, nil
}

// newClients makes the SDK clients from cfg; endpointS3, when set, points
// S3 at another endpoint, path-style (an S3-compatible store or a fake).
func newClients(cfg aws.Config, endpointS3 string) *awsClients {
	return &awsClients{
		EC2: ec2.NewFromConfig(cfg),
		ELB: elb.NewFromConfig(cfg),
		S3: s3.NewFromConfig(cfg, func(o *s3.Options) {
			if endpointS3 != "" {
				o.BaseEndpoint = aws.String(endpointS3)
				o.UsePathStyle = true
			}
		}),
		Region: cfg.Region,
	}
}
