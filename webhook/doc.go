// Package webhook is the server side of asmp's webhooks, the parts that do
// not depend on storage: signing messages the Standard Webhooks way
// (https://www.standardwebhooks.com), generating and rotating "whsec_"
// secrets, the rules that keep a webhook target from reaching inside the
// server's network (Policy, with the --webhook-allow list), a Sender that
// delivers one signed message under those rules and reports the Attempt,
// and the retry Schedule.
//
// # Signing
//
// Sign returns the three headers of a signed request: webhook-id (the
// message's stable id, the receiver's deduplication key), webhook-timestamp
// (Unix seconds of the attempt) and webhook-signature, "v1," followed by the
// base64 HMAC-SHA256 of id + "." + timestamp + "." + body under each live
// secret, space-separated. While a secret is being rotated (Rotate), the old
// one stays live until its ExpiresAt, so a receiver that has not yet
// switched keeps verifying. Receivers verify with client.VerifyWebhook
// (standard library only) or any Standard Webhooks library.
//
// # Targets
//
// Policy.CheckURL decides whether a URL may be a webhook target: https
// only, and only to addresses on the public internet, unless the allow list
// names the host or a range holding its addresses. It resolves the name
// and checks every address. The Sender checks again when it connects, the
// address it actually connects to (net.Dialer's Control), so a name that
// resolved to a public address when the subscription was made and to
// 127.0.0.1 when the message is sent is refused too. Redirects are not
// followed, proxies from the environment are not used, and answers are read
// up to a bound.
//
// # Retries
//
// Schedule.Next says when to try a failed message again: exponential
// backoff with jitter, from 5 s up to 1 h between attempts, until 24 h after
// the first attempt (all configurable); after that the message is failed.
//
// The subscriptions API, the transactional outbox in the stores and the
// delivery workers are built on these (docs/WEBHOOKS.md).
package webhook
