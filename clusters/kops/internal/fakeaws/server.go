package fakeaws

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Handler answers the AWS SDK's requests for EC2, ELB v2 and S3 at one
// endpoint, telling them apart by the service in their SigV4 credential
// scope, as AWS's own endpoints are told apart by host name.
//
// Only requests signed with AccessKeyID are answered: the fake listens on
// loopback, where another user of the machine could reach it, and only
// the processes given the key (through the environment, which other users
// cannot read) may change its world.
type Handler struct {
	Store       *Store
	AccessKeyID string
	s3          http.Handler
}

// NewHandler serves store's world to requests signed with accessKeyID.
func NewHandler(store *Store, accessKeyID string) *Handler {
	return &Handler{Store: store, AccessKeyID: accessKeyID, s3: newS3()}
}

// NewCredentials are a fresh access key ID and secret for a Handler.
func NewCredentials() (id, secret string) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "AKIAFAKE" + strings.ToUpper(hex.EncodeToString(b[:8])), hex.EncodeToString(b[8:])
}

type apiError struct {
	status    int
	code, msg string
}

// scope is the access key ID and service of a SigV4 Authorization header:
// "AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, ...".
func scope(auth string) (akid, service string) {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return "", ""
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return "", ""
	}
	return parts[0], parts[3]
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	akid, service := scope(r.Header.Get("Authorization"))
	if akid == "" || akid != h.AccessKeyID {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the provided access credentials (fake AWS)</Message></Error></Errors><RequestID>fake</RequestID></Response>`)
		return
	}
	if service == "s3" {
		h.count("s3 " + r.Method)
		h.s3.ServeHTTP(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.PostForm.Get("Action")
	var call func(*World, string, url.Values) (any, *apiError)
	switch service {
	case "ec2":
		call = ec2Call
	case "elasticloadbalancing":
		call = elbCall
	default:
		http.Error(w, "fake AWS: no service "+service, http.StatusBadRequest)
		return
	}
	var body any
	var aerr *apiError
	err := h.Store.Update(func(wd *World) error {
		if wd.Calls == nil {
			wd.Calls = map[string]int{}
		}
		wd.Calls[service+" "+action]++
		body, aerr = call(wd, action, r.PostForm)
		return nil
	})
	if err != nil {
		http.Error(w, "fake AWS: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	if aerr != nil {
		w.WriteHeader(aerr.status)
		if service == "ec2" {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fake</RequestID></Response>`, esc(aerr.code), esc(aerr.msg))
		} else {
			fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fake</RequestId></ErrorResponse>`, esc(aerr.code), esc(aerr.msg))
		}
		return
	}
	b, err := xml.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write([]byte(xml.Header))
	w.Write(b)
}

func (h *Handler) count(what string) {
	_ = h.Store.Update(func(wd *World) error {
		if wd.Calls == nil {
			wd.Calls = map[string]int{}
		}
		wd.Calls[what]++
		return nil
	})
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
