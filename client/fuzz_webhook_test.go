package client_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
)

// FuzzVerifyWebhook checks VerifyWebhook's reading of the three headers
// against a plain statement of the rule: it never panics, every error is
// one of the documented ones, and it accepts exactly when the id is
// present, the timestamp is decimal Unix seconds within the tolerance, and
// one space-separated entry of webhook-signature is "v1," and the base64
// HMAC-SHA256 of id.timestamp.body. Whatever else the header holds, adding
// the right signature to it makes a valid message verify. The seed corpus
// is in testdata/fuzz/FuzzVerifyWebhook.
func FuzzVerifyWebhook(f *testing.F) {
	f.Add(vecID, vecTS, vecSig, []byte(vecBody))
	f.Add(vecID, vecTS, vecOther+" "+vecSig, []byte(vecBody))
	f.Add(vecID, vecTS, "v1a,abc v1,"+strings.Repeat("A", 43)+"= v1,", []byte(vecBody))
	f.Add("", "+1614265330", "v1,,,, v1", []byte{})
	f.Add("msg.1", "01614265330", "\tv1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\n", []byte("{}"))
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(vecSecret, "whsec_"))
	sign := func(id, ts string, body []byte) string {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	sentinels := []error{client.ErrWebhookMalformed, client.ErrWebhookTooOld, client.ErrWebhookTooNew, client.ErrWebhookSignature}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		// net/http would never deliver values with these; Header.Set keeps them.
		if strings.ContainsAny(id+ts+sig, "\r\n") {
			return
		}
		err := client.VerifyWebhookAt(vecSecret, h, body, 5*time.Minute, vecTime)
		if err != nil {
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("undocumented error %v", err)
			}
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		tsOK := perr == nil && ts != "" && strings.Trim(ts, "0123456789") == "" && len(ts) <= 18 &&
			sec >= vecTime.Unix()-300 && sec <= vecTime.Unix()+300
		want := sign(id, ts, body)
		match := false
		for _, s := range strings.Fields(sig) {
			match = match || s == want
		}
		if accept := id != "" && tsOK && match; accept != (err == nil) {
			t.Fatalf("VerifyWebhookAt(id %q, ts %q, sig %q) = %v; the rule says accept=%v", id, ts, sig, err, accept)
		}
		if id != "" && tsOK {
			h.Set("webhook-signature", sig+" "+want)
			if err := client.VerifyWebhookAt(vecSecret, h, body, 5*time.Minute, vecTime); err != nil {
				t.Fatalf("with the right signature added to %q: %v", sig, err)
			}
		}
	})
}
