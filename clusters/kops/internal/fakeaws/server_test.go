package fakeaws

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// The fake answers only requests signed with its access key ID: another
// user of the machine, who can reach its loopback port but not read the
// harness's environment, gets AuthFailure and changes nothing.
func TestOnlyTheGivenAccessKeyIsAnswered(t *testing.T) {
	store := &Store{Path: filepath.Join(t.TempDir(), "world.json")}
	if err := store.Update(func(w *World) error {
		w.Instances = append(w.Instances, &Instance{ID: w.ID("i"), Type: "c5.large", State: "running", PublicIP: "198.51.100.1", Tags: map[string]string{"a": "b"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	akid, secret := NewCredentials()
	srv := httptest.NewServer(NewHandler(store, akid))
	defer srv.Close()
	client := func(id string) *ec2.Client {
		return ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
	}
	ctx := context.Background()
	out, err := client(akid).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || aws.ToString(out.Reservations[0].Instances[0].PublicIpAddress) != "198.51.100.1" {
		t.Fatalf("DescribeInstances: %+v", out.Reservations)
	}
	other, _ := NewCredentials()
	_, err = client(other).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-00000001"}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AuthFailure" {
		t.Fatalf("TerminateInstances with another access key: %v, want AuthFailure", err)
	}
	w, err := store.Read()
	if err != nil {
		t.Fatal(err)
	}
	if w.Instances[0].State != "running" {
		t.Errorf("the instance is %s after a refused call", w.Instances[0].State)
	}
	if w.Calls["ec2 TerminateInstances"] != 0 || w.Calls["ec2 DescribeInstances"] != 1 {
		t.Errorf("calls recorded: %v", w.Calls)
	}
}
