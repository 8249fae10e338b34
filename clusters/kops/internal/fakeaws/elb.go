package fakeaws

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
)

// Elastic Load Balancing v2 in the AWS query protocol (API version
// 2015-12-01): lists as Name.member.1, answers under
// <ActionResponse><ActionResult>, errors under <ErrorResponse>.

type xELBTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xTagDescription struct {
	ResourceArn string    `xml:"ResourceArn"`
	Tags        []xELBTag `xml:"Tags>member"`
}

type xLoadBalancer struct {
	LoadBalancerArn string `xml:"LoadBalancerArn"`
}

// maxTagARNs is DescribeTags' limit of ARNs per call.
const maxTagARNs = 20

func elbCall(w *World, action string, form url.Values) (any, *apiError) {
	switch action {
	case "DescribeLoadBalancers":
		var sel []xLoadBalancer
		for _, lb := range w.LBs {
			sel = append(sel, xLoadBalancer{lb.ARN})
		}
		items, next := page(sel, form.Get("Marker"))
		return &struct {
			XMLName       xml.Name        `xml:"DescribeLoadBalancersResponse"`
			LoadBalancers []xLoadBalancer `xml:"DescribeLoadBalancersResult>LoadBalancers>member"`
			NextMarker    string          `xml:"DescribeLoadBalancersResult>NextMarker,omitempty"`
		}{LoadBalancers: items, NextMarker: next}, nil
	case "DescribeTags":
		arns := listParam(form, "ResourceArns.member")
		if len(arns) > maxTagARNs {
			return nil, &apiError{http.StatusBadRequest, "ValidationError", "at most 20 ARNs"}
		}
		var descs []xTagDescription
		for _, lb := range w.LBs {
			if slices.Contains(arns, lb.ARN) {
				d := xTagDescription{ResourceArn: lb.ARN}
				for _, k := range sortedKeys(lb.Tags) {
					d.Tags = append(d.Tags, xELBTag{k, lb.Tags[k]})
				}
				descs = append(descs, d)
			}
		}
		return &struct {
			XMLName xml.Name          `xml:"DescribeTagsResponse"`
			Descs   []xTagDescription `xml:"DescribeTagsResult>TagDescriptions>member"`
		}{Descs: descs}, nil
	case "DeleteLoadBalancer":
		arn := form.Get("LoadBalancerArn")
		w.LBs = slices.DeleteFunc(w.LBs, func(lb *LB) bool { return lb.ARN == arn })
		return &struct {
			XMLName xml.Name `xml:"DeleteLoadBalancerResponse"`
			Result  string   `xml:"DeleteLoadBalancerResult"`
		}{}, nil
	}
	return nil, &apiError{http.StatusBadRequest, "InvalidAction", "The action " + action + " is not valid for this web service (fake ELB)."}
}
