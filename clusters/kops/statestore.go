package kops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// bucketPrefix starts the name of every state store bucket skewtest makes;
// the sweep and the janitor look only at buckets named so.
const bucketPrefix = "skewtest-kops-"

// runBucket is the name of the run's own state store bucket (S3 names are
// lowercase, at most 63 characters).
func runBucket(runID string) string {
	b := bucketPrefix + strings.ToLower(runID)
	if len(b) > 63 {
		b = b[:63]
	}
	return b
}

// createStateStore makes the run's bucket, tagged with the run's tags, in
// the run's region. The state records the bucket before it is made, so a
// Down after any failure deletes it.
func (p *provider) createStateStore(ctx context.Context) error {
	bucket := runBucket(p.cfg.RunID)
	if err := p.updateState(func(s *State) { s.Bucket = bucket }); err != nil {
		return err
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if p.clients.Region != "" && p.clients.Region != "us-east-1" {
		// us-east-1 refuses a location constraint naming itself.
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(p.clients.Region)}
	}
	if _, err := p.clients.S3.CreateBucket(ctx, in); err != nil {
		return fmt.Errorf("create the state store bucket %s: %w", bucket, err)
	}
	var tags []s3types.Tag
	for _, k := range sortedKeys(p.tags) {
		tags = append(tags, s3types.Tag{Key: aws.String(k), Value: aws.String(p.tags[k])})
	}
	if _, err := p.clients.S3.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(bucket),
		Tagging: &s3types.Tagging{TagSet: tags}}); err != nil {
		return fmt.Errorf("tag the state store bucket %s: %w", bucket, err)
	}
	p.log.Info("state store bucket made", "bucket", bucket, "tags", cloudLabels(p.tags))
	return nil
}

// deleteBucket empties bucket (every object version and delete marker) and
// deletes it. A bucket that is already gone is no error.
func deleteBucket(ctx context.Context, c *s3.Client, bucket string) error {
	pg := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if isNoSuchBucket(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list bucket %s: %w", bucket, err)
		}
		var ids []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			ids = append(ids, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		for _, id := range ids {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: id.Key, VersionId: id.VersionId}); err != nil {
				return fmt.Errorf("empty bucket %s: delete %s: %w", bucket, aws.ToString(id.Key), err)
			}
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil && !isNoSuchBucket(err) {
		return fmt.Errorf("delete bucket %s: %w", bucket, err)
	}
	return nil
}

// bucketTags are bucket's tags; a bucket without any has none.
func bucketTags(ctx context.Context, c *s3.Client, bucket string) (map[string]string, error) {
	out, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(bucket)})
	if err != nil {
		if isNoSuchBucket(err) || strings.Contains(err.Error(), "NoSuchTagSet") {
			return map[string]string{}, nil
		}
		return nil, fmt.Errorf("read the tags of bucket %s: %w", bucket, err)
	}
	tags := map[string]string{}
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}

func isNoSuchBucket(err error) bool {
	var nb *s3types.NoSuchBucket
	return err != nil && (errors.As(err, &nb) || strings.Contains(err.Error(), "NoSuchBucket"))
}
