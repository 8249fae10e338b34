//go:build tools

// Package deps pins modules that skewtest's planned code will use before
// any package imports them, so go.mod names the versions the project was
// checked against: aws-sdk-go-v2 for the kops (AWS) provider.
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/service/ec2"
)
