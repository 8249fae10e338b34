package kops

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

// TestJanitorDryRunThenDelete: expired skewtest resources of every kind
// are listed by the dry run and nothing is deleted; DryRun=false (make
// janitor-aws DRY_RUN=false) deletes exactly them, waiting for the
// terminated instance's volume to read available. Unexpired runs and
// resources without skewtest's run tag are never touched.
func TestJanitorDryRunThenDelete(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	old := map[string]string{tagRunID: "old-run", tagOwner: "alice", tagExpiry: now.Add(-time.Hour).Format(time.RFC3339)}
	fresh := map[string]string{tagRunID: "fresh-run", tagOwner: "bob", tagExpiry: now.Add(time.Hour).Format(time.RFC3339)}
	foreign := map[string]string{"team": "payments", tagExpiry: now.Add(-time.Hour).Format(time.RFC3339)}
	store := &fakeaws.Store{Path: filepath.Join(t.TempDir(), "world.json")}
	if err := store.Update(func(w *fakeaws.World) error {
		for _, tags := range []map[string]string{old, fresh, foreign} {
			i := &fakeaws.Instance{ID: w.ID("i"), Type: "c5.large", State: "running", Tags: tags}
			w.Instances = append(w.Instances, i)
			w.Volumes = append(w.Volumes, &fakeaws.Volume{ID: w.ID("vol"), Tags: tags, Attachments: []fakeaws.Attachment{{Instance: i.ID, State: "attached"}}})
			w.Groups = append(w.Groups, &fakeaws.Group{ID: w.ID("sg"), Tags: tags, UsedBy: i.ID})
			w.LBs = append(w.LBs, &fakeaws.LB{ARN: "arn:lb/" + w.ID("lb"), Tags: tags})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := fakeClients(t, store)
	ctx := context.Background()
	for name, tags := range map[string]map[string]string{runBucket("old-run"): old, runBucket("fresh-run"): fresh, "payments-data": foreign} {
		if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		var ts []s3types.Tag
		for k, v := range tags {
			ts = append(ts, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if _, err := c.S3.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(name), Tagging: &s3types.Tagging{TagSet: ts}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("cluster/config"), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		w := readWorld(t, store)
		n := len(w.Volumes) + len(w.Groups) + len(w.LBs)
		for _, i := range w.Instances {
			if i.State == "running" {
				n++
			}
		}
		b, err := c.S3.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			t.Fatal(err)
		}
		return n + len(b.Buckets)
	}
	before := count()

	var out bytes.Buffer
	found, err := Janitor(ctx, c, JanitorConfig{Region: "us-east-1", DryRun: true, Now: now, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range found {
		if r.Tags[tagRunID] != "old-run" || r.Deleted {
			t.Errorf("dry run found %s (deleted %t)", r, r.Deleted)
		}
		kinds = append(kinds, r.Kind)
	}
	slices.Sort(kinds)
	if want := []string{"bucket", "instance", "load-balancer", "security-group", "volume"}; !slices.Equal(kinds, want) {
		t.Fatalf("dry run found %v, want one of each: %v\n%s", kinds, want, out.String())
	}
	if count() != before {
		t.Fatal("the dry run deleted something")
	}
	if !strings.Contains(out.String(), "dry run: nothing deleted") || !strings.Contains(out.String(), "would delete volume") {
		t.Errorf("dry run output:\n%s", out.String())
	}
	t.Logf("dry run:\n%s", out.String())

	out.Reset()
	found, err = Janitor(ctx, c, JanitorConfig{Region: "us-east-1", DryRun: false, Now: now, Out: &out})
	if err != nil {
		t.Fatalf("janitor: %v\n%s", err, out.String())
	}
	for _, r := range found {
		if !r.Deleted {
			t.Errorf("not deleted: %s", r)
		}
	}
	if got := count(); got != before-5 {
		t.Errorf("%d resources left, want %d (the fresh run's and the foreign ones)", got, before-5)
	}
	w := readWorld(t, store)
	for _, v := range w.Volumes {
		if v.Tags[tagRunID] == "old-run" {
			t.Errorf("old volume %s left", v.ID)
		}
	}
	t.Logf("delete:\n%s", out.String())
}
