package events

import (
	"github.com/cloudevents/sdk-go/v2/event"
)

// Event is a CloudEvents 1.0 event, the sdk-go type.
type Event = event.Event

// JSON is the content type of event data.
const JSON = "application/json"

// Structured is the content type of a structured-mode CloudEvent.
const Structured = "application/cloudevents+json"
