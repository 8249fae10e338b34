package fakeaws

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EC2 in its query protocol (API version 2016-11-15): form-encoded POSTs
// naming an Action, lists flattened as Name.1, Name.2, answers in XML
// under <ActionResponse>, errors under <Response><Errors>.

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func toTags(m map[string]string) []xTag {
	var out []xTag
	for _, k := range sortedKeys(m) {
		out = append(out, xTag{k, m[k]})
	}
	return out
}

type xInstance struct {
	InstanceID   string `xml:"instanceId"`
	InstanceType string `xml:"instanceType"`
	State        struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	PrivateIP string `xml:"privateIpAddress,omitempty"`
	PublicIP  string `xml:"ipAddress,omitempty"`
	Placement struct {
		Zone string `xml:"availabilityZone"`
	} `xml:"placement"`
	Tags []xTag `xml:"tagSet>item"`
}

type xReservation struct {
	ID        string      `xml:"reservationId"`
	Instances []xInstance `xml:"instancesSet>item"`
}

type xAttachment struct {
	VolumeID   string `xml:"volumeId"`
	InstanceID string `xml:"instanceId"`
	Status     string `xml:"status"`
}

type xVolume struct {
	VolumeID    string        `xml:"volumeId"`
	Status      string        `xml:"status"`
	Attachments []xAttachment `xml:"attachmentSet>item"`
	Tags        []xTag        `xml:"tagSet>item"`
}

type xGroup struct {
	GroupID string `xml:"groupId"`
	Tags    []xTag `xml:"tagSet>item"`
}

// instanceStateCodes are EC2's codes for instance states.
var instanceStateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

type filter struct {
	name   string
	values []string
}

// listParam is a flattened list: prefix.1, prefix.2, ...
func listParam(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func filters(form url.Values) []filter {
	var out []filter
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name := form.Get(p + ".Name")
		if name == "" {
			return out
		}
		out = append(out, filter{name, listParam(form, p+".Value")})
	}
}

// matches applies EC2 filters: tag:K, tag-key, instance-state-name.
func matches(tags map[string]string, state string, fs []filter) bool {
	for _, f := range fs {
		switch {
		case strings.HasPrefix(f.name, "tag:"):
			if !slices.Contains(f.values, tags[strings.TrimPrefix(f.name, "tag:")]) {
				return false
			}
		case f.name == "tag-key":
			if !slices.ContainsFunc(f.values, func(k string) bool { _, ok := tags[k]; return ok }) {
				return false
			}
		case f.name == "instance-state-name":
			if !slices.Contains(f.values, state) {
				return false
			}
		}
	}
	return true
}

// page cuts items into AWS-style pages; next is empty on the last.
func page[T any](items []T, token string) ([]T, string) {
	start, _ := strconv.Atoi(token)
	start = min(max(start, 0), len(items))
	end := min(start+PageSize, len(items))
	if end < len(items) {
		return items[start:end], strconv.Itoa(end)
	}
	return items[start:end], ""
}

// ec2Call answers one EC2 action on w: the response body, or an error.
func ec2Call(w *World, action string, form url.Values) (any, *apiError) {
	switch action {
	case "DescribeInstances":
		return describeInstances(w, form), nil
	case "DescribeVolumes":
		return describeVolumes(w, form)
	case "DescribeSecurityGroups":
		var sel []xGroup
		for _, g := range w.Groups {
			sel = append(sel, xGroup{g.ID, toTags(g.Tags)})
		}
		items, next := page(sel, form.Get("NextToken"))
		return &struct {
			XMLName   xml.Name `xml:"DescribeSecurityGroupsResponse"`
			Groups    []xGroup `xml:"securityGroupInfo>item"`
			NextToken string   `xml:"nextToken,omitempty"`
		}{Groups: items, NextToken: next}, nil
	case "TerminateInstances":
		for _, id := range listParam(form, "InstanceId") {
			w.terminate(id)
		}
		return &struct {
			XMLName xml.Name `xml:"TerminateInstancesResponse"`
		}{}, nil
	case "DeleteVolume":
		id := form.Get("VolumeId")
		i := slices.IndexFunc(w.Volumes, func(v *Volume) bool { return v.ID == id })
		if i < 0 {
			return nil, &apiError{http.StatusBadRequest, "InvalidVolume.NotFound", "The volume '" + id + "' does not exist."}
		}
		if len(w.Volumes[i].Attachments) > 0 || w.Volumes[i].InUseLag > 0 {
			return nil, &apiError{http.StatusBadRequest, "VolumeInUse", "Volume " + id + " is currently attached"}
		}
		w.Volumes = slices.Delete(w.Volumes, i, i+1)
		return &struct {
			XMLName xml.Name `xml:"DeleteVolumeResponse"`
			Return  bool     `xml:"return"`
		}{Return: true}, nil
	case "DeleteSecurityGroup":
		id := form.Get("GroupId")
		i := slices.IndexFunc(w.Groups, func(g *Group) bool { return g.ID == id })
		if i < 0 {
			return nil, &apiError{http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '" + id + "' does not exist"}
		}
		if w.Groups[i].UsedBy != "" {
			return nil, &apiError{http.StatusBadRequest, "DependencyViolation", "resource " + id + " has a dependent object"}
		}
		w.Groups = slices.Delete(w.Groups, i, i+1)
		return &struct {
			XMLName xml.Name `xml:"DeleteSecurityGroupResponse"`
			Return  bool     `xml:"return"`
		}{Return: true}, nil
	case "GetConsoleOutput":
		id := form.Get("InstanceId")
		for _, i := range w.Instances {
			if i.ID == id {
				return &struct {
					XMLName    xml.Name `xml:"GetConsoleOutputResponse"`
					InstanceID string   `xml:"instanceId"`
					Timestamp  string   `xml:"timestamp"`
					Output     string   `xml:"output"`
				}{InstanceID: id, Timestamp: time.Now().UTC().Format(time.RFC3339), Output: base64.StdEncoding.EncodeToString([]byte(i.Console))}, nil
			}
		}
		return nil, &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '" + id + "' does not exist"}
	}
	return nil, &apiError{http.StatusBadRequest, "InvalidAction", "The action " + action + " is not valid for this web service (fake EC2)."}
}

func describeInstances(w *World, form url.Values) any {
	ids := listParam(form, "InstanceId")
	fs := filters(form)
	var sel []xInstance
	var terminating []*Instance
	for _, i := range w.Instances {
		if len(ids) > 0 && !slices.Contains(ids, i.ID) {
			continue
		}
		if i.State == "shutting-down" {
			// Terminated on the next read: AWS takes a while.
			terminating = append(terminating, i)
		}
		if !matches(i.Tags, i.State, fs) {
			continue
		}
		x := xInstance{InstanceID: i.ID, InstanceType: i.Type, PrivateIP: i.PrivateIP, PublicIP: i.PublicIP, Tags: toTags(i.Tags)}
		x.State.Code, x.State.Name = instanceStateCodes[i.State], i.State
		x.Placement.Zone = i.Zone
		sel = append(sel, x)
	}
	for _, i := range terminating {
		i.State = "terminated"
	}
	items, next := page(sel, form.Get("NextToken"))
	out := &struct {
		XMLName      xml.Name       `xml:"DescribeInstancesResponse"`
		Reservations []xReservation `xml:"reservationSet>item"`
		NextToken    string         `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, x := range items {
		out.Reservations = append(out.Reservations, xReservation{ID: "r-" + strings.TrimPrefix(x.InstanceID, "i-"), Instances: []xInstance{x}})
	}
	return out
}

func describeVolumes(w *World, form url.Values) (any, *apiError) {
	ids := listParam(form, "VolumeId")
	for _, id := range ids {
		if !slices.ContainsFunc(w.Volumes, func(v *Volume) bool { return v.ID == id }) {
			return nil, &apiError{http.StatusBadRequest, "InvalidVolume.NotFound", "The volume '" + id + "' does not exist."}
		}
	}
	fs := filters(form)
	var sel []xVolume
	for _, v := range w.Volumes {
		if len(ids) > 0 && !slices.Contains(ids, v.ID) {
			continue
		}
		state := "available"
		var atts []xAttachment
		for i := range v.Attachments {
			a := &v.Attachments[i]
			st := a.State
			if a.Lag > 0 {
				st, a.Lag = a.Moving, a.Lag-1
			}
			atts = append(atts, xAttachment{VolumeID: v.ID, InstanceID: a.Instance, Status: st})
		}
		if len(atts) > 0 || v.InUseLag > 0 {
			state = "in-use"
			if len(atts) == 0 {
				v.InUseLag--
			}
		}
		if !matches(v.Tags, "", fs) {
			continue
		}
		sel = append(sel, xVolume{VolumeID: v.ID, Status: state, Attachments: atts, Tags: toTags(v.Tags)})
	}
	items, next := page(sel, form.Get("NextToken"))
	return &struct {
		XMLName   xml.Name  `xml:"DescribeVolumesResponse"`
		Volumes   []xVolume `xml:"volumeSet>item"`
		NextToken string    `xml:"nextToken,omitempty"`
	}{Volumes: items, NextToken: next}, nil
}

// terminate is what EC2 does when an instance goes: root volumes deleted,
// other volumes detached (in-use for two more reads), groups released.
func (w *World) terminate(id string) {
	for _, i := range w.Instances {
		if i.ID == id && i.State != "terminated" {
			i.State = "shutting-down"
		}
	}
	w.Volumes = slices.DeleteFunc(w.Volumes, func(v *Volume) bool {
		return v.DeleteOnTermination && slices.ContainsFunc(v.Attachments, func(a Attachment) bool { return a.Instance == id })
	})
	for _, v := range w.Volumes {
		n := len(v.Attachments)
		v.Attachments = slices.DeleteFunc(v.Attachments, func(a Attachment) bool { return a.Instance == id })
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
