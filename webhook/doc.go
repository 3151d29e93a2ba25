// Package webhook delivers Interlock's events to other systems as
// outbound webhooks that follow the Standard Webhooks specification
// (https://www.standardwebhooks.com): each a POST of a JSON body
// ({"type", "timestamp", "data", ...}, see [Payload]) with the headers
// webhook-id, webhook-timestamp and webhook-signature (see [Sign]).
//
// Subscriptions are YAML (see [Parse]), kept under the key "webhooks"
// ([Key]) of the <prefix>_config bucket: a [Service] writes its file
// there at start and whenever it changes, and every process applies each
// new value without a restart; a value that does not parse is refused
// and the subscriptions in force stay.
//
// Each subscription has a durable consumer of the events stream of its
// own (<prefix>-webhook-<name>, through package notify), so a slow or
// failing receiver holds back neither the workers nor another
// subscription. A failed attempt (a status other than 2xx, a timeout, no
// connection) is tried again with exponential backoff and jitter until
// the subscription's retryFor has passed since the event was published;
// then, or at once when the receiver answers 410 Gone, the event is
// dead-lettered to <prefix>.dlq.undeliverable with the last error.
// Redirects are not followed. A receiver whose host resolves to a
// loopback, private, link-local or other internal address is not called
// unless [Config].Egress allows it (see package egress): the event is
// dead-lettered at once. The webhook-id is derived from the event's
// id and the subscription, the same on every attempt, so a receiver
// drops repeats.
//
// A resume token never leaves: it is taken out of every payload. A
// subscription with `callbacks: true` gets instead a callbackUrl in
// interrupted payloads, when [Config].CallbackURL is set.
//
// Every attempt is recorded in the bucket <prefix>_webhook_deliveries
// ([DeliveriesBucket]) under <subscription>.<webhook-id>, listed by
// [Deliveries] (and `interlock webhooks deliveries`), and heard by
// [Config].Observe for metrics.
package webhook
