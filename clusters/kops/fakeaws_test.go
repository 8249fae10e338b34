package kops

// The provider's tests reach the fakes of AWS (clusters/kops/internal/
// fakeaws) as the provider reaches AWS: the SDK's own clients, made by
// newClients from an aws.Config whose BaseEndpoint is the fake's URL, as
// AWS_ENDPOINT_URL sets it, signing with the fake's credentials.

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

// fakePoll is how often the provider asks the fakes again.
const fakePoll = 5e6

// fakeEndpoint serves store's world on loopback for the test; the
// credentials are the ones it answers to.
func fakeEndpoint(t *testing.T, store *fakeaws.Store) (url, akid, secret string) {
	t.Helper()
	akid, secret = fakeaws.NewCredentials()
	srv := httptest.NewServer(fakeaws.NewHandler(store, akid))
	t.Cleanup(srv.Close)
	return srv.URL, akid, secret
}

// fakeClients are the provider's Clients against the fakes.
func fakeClients(t *testing.T, store *fakeaws.Store) *awsClients {
	t.Helper()
	url, akid, secret := fakeEndpoint(t, store)
	c := newClients(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(akid, secret, "")}, "")
	c.Poll = fakePoll
	return c
}

// readWorld is the fake world now.
func readWorld(t *testing.T, store *fakeaws.Store) *fakeaws.World {
	t.Helper()
	w, err := store.Read()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestClientsFromTheEnvironmentReachTheEndpoint: what a user (and make
// test-hosts) sets, AWS_ENDPOINT_URL with credentials in the environment,
// takes every client the provider makes from the SDK's default chain to
// that endpoint, S3 included (path-style, as for any IP endpoint).
func TestClientsFromTheEnvironmentReachTheEndpoint(t *testing.T) {
	store := &fakeaws.Store{Path: filepath.Join(t.TempDir(), "world.json")}
	url, akid, secret := fakeEndpoint(t, store)
	t.Setenv("AWS_ENDPOINT_URL", url)
	t.Setenv("AWS_ACCESS_KEY_ID", akid)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	ctx := context.Background()
	cfg, err := loadAWS(ctx, "us-east-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(cfg, "")
	if _, err := clusterInstances(ctx, c.EC2, "skewtest-x.k8s.local", false); err != nil {
		t.Fatal(err)
	}
	if _, err := listLoadBalancers(ctx, c.ELB, func(map[string]string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("skewtest-kops-x")}); err != nil {
		t.Fatal(err)
	}
	w := readWorld(t, store)
	for _, call := range []string{"ec2 DescribeInstances", "elasticloadbalancing DescribeLoadBalancers", "s3 PUT"} {
		if w.Calls[call] == 0 {
			t.Errorf("%s did not reach the endpoint; calls: %v", call, w.Calls)
		}
	}
}
