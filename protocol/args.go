package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// Display hints: the values of `x-interlock-display` in an argument's
// (or a question's) schema, which say how a surface shows the value.
const (
	// DisplayCurrency: a number that is an amount of money, in the
	// currency [KeywordCurrency] names.
	DisplayCurrency = "currency"
	// DisplayEmail: an e-mail address, shown as a mailto link.
	DisplayEmail = "email"
	// DisplayURL: a web address, shown as a link when it is http or https.
	DisplayURL = "url"
	// DisplayMarkdown: text written in Markdown, rendered safely.
	DisplayMarkdown = "markdown"
	// DisplayDateTime: an RFC 3339 time, shown in the reader's time zone.
	DisplayDateTime = "date-time"
)

// Keywords Interlock reads in a schema beside JSON Schema's own; a JSON
// Schema validator ignores them.
const (
	// KeywordDisplay is the display hint of a value ([DisplayCurrency], ...).
	KeywordDisplay = "x-interlock-display"
	// KeywordCurrency names a currency amount's currency: an ISO 4217
	// code ("EUR"), or the name of the argument whose value is the code.
	// Without it the argument named "currency" is.
	KeywordCurrency = "x-interlock-currency"
	// KeywordKey marks an argument the queue shows in a row ([KeyArgs]).
	KeywordKey = "x-interlock-key"
)

// Arg is one argument of an approval as a surface shows and edits it:
// its value with what its schema says of it. [Args] lists them.
type Arg struct {
	// Name is the argument's key in args.
	Name string
	// Title is the schema's title, or the name.
	Title string
	// Description is the schema's description.
	Description string
	// Type is the JSON type the argument takes: the schema's type, else
	// the type of its value ([JSONTypeOf]). [Value] reads typed text by it.
	Type string
	// Display is the display hint: the schema's x-interlock-display, or
	// one its format implies (email, uri, date-time).
	Display string
	// Currency is the ISO 4217 code of a currency amount, when known.
	Currency string
	// Enum are the values the schema allows, when it lists them.
	Enum []EnumValue
	// Bounds of a number, and of a string's length, from the schema.
	Minimum, Maximum                   *float64
	ExclusiveMinimum, ExclusiveMaximum *float64
	MultipleOf                         *float64
	MinLength, MaxLength               *int
	// Required is set when the schema requires the argument.
	Required bool
	// Key is set when the schema marks the argument key ([KeywordKey]).
	Key bool
	// Value is the argument's value; Text is it for a person: a
	// currency amount with its currency ("$4,800.00"), a time in UTC,
	// yes or no, a string as it is, other JSON compacted.
	Value json.RawMessage
	Text  string
}

// EnumValue is one value an enum allows.
type EnumValue struct {
	// Value is the JSON value; Text is it for a person.
	Value json.RawMessage
	Text  string
}

// Selected reports whether e is the value raw holds.
func (e EnumValue) Selected(raw json.RawMessage) bool { return SameJSON(e.Value, raw) }

// Input returns the text a form's field starts with for the argument: a
// string as it is, other JSON as written.
func (a Arg) Input() string {
	if JSONTypeOf(a.Value) == JSONString {
		var s string
		_ = json.Unmarshal(a.Value, &s)
		return s
	}
	return compactJSON(a.Value)
}

// Scalar reports whether the argument takes a string, a number or a
// boolean, which a form edits in one field.
func (a Arg) Scalar() bool {
	switch a.Type {
	case JSONString, JSONNumber, JSONInteger, JSONBoolean:
		return true
	}
	return false
}

// schemaNode is what Interlock reads of a schema.
type schemaNode struct {
	Type             json.RawMessage `json:"type"`
	Title            string          `json:"title"`
	Description      string          `json:"description"`
	Format           string          `json:"format"`
	Display          string          `json:"x-interlock-display"`
	Currency         string          `json:"x-interlock-currency"`
	Key              bool            `json:"x-interlock-key"`
	Enum             []json.RawMessage
	Minimum          *float64 `json:"minimum"`
	Maximum          *float64 `json:"maximum"`
	ExclusiveMinimum *float64 `json:"exclusiveMinimum"`
	ExclusiveMaximum *float64 `json:"exclusiveMaximum"`
	MultipleOf       *float64 `json:"multipleOf"`
	MinLength        *int     `json:"minLength"`
	MaxLength        *int     `json:"maxLength"`
	Properties       json.RawMessage
	Required         []string
}

// SchemaType returns the JSON type a schema gives its value: its type,
// or the first of a list of types that is not "null"; "" when it gives
// none.
func SchemaType(schema json.RawMessage) string {
	var n schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &n) != nil {
		return ""
	}
	return n.jsonType()
}

func (n schemaNode) jsonType() string {
	var one string
	if json.Unmarshal(n.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(n.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	return ""
}

// display is the display hint of a node: its own, or its format's.
func (n schemaNode) display() string {
	if n.Display != "" {
		return n.Display
	}
	switch n.Format {
	case "email", "idn-email":
		return DisplayEmail
	case "uri", "iri":
		return DisplayURL
	case "date-time":
		return DisplayDateTime
	}
	return ""
}

// Args returns an approval's arguments as a surface shows them, in the
// order of the schema's properties and then, sorted, those it does not
// describe. schema may be empty: each argument is then typed by its
// value. Args that are not a JSON object give none.
func Args(args, schema json.RawMessage) []Arg {
	var values map[string]json.RawMessage
	if json.Unmarshal(args, &values) != nil {
		return nil
	}
	var root schemaNode
	if len(schema) > 0 {
		_ = json.Unmarshal(schema, &root)
	}
	props := map[string]json.RawMessage{}
	_ = json.Unmarshal(root.Properties, &props)
	order := objectKeys(root.Properties)
	var rest []string
	for k := range values {
		if _, ok := props[k]; !ok {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	out := make([]Arg, 0, len(values))
	for _, name := range append(order, rest...) {
		v, ok := values[name]
		if !ok {
			continue
		}
		var n schemaNode
		_ = json.Unmarshal(props[name], &n)
		a := Arg{Name: name, Title: n.Title, Description: n.Description, Type: n.jsonType(), Display: n.display(),
			Minimum: n.Minimum, Maximum: n.Maximum, ExclusiveMinimum: n.ExclusiveMinimum, ExclusiveMaximum: n.ExclusiveMaximum,
			MultipleOf: n.MultipleOf, MinLength: n.MinLength, MaxLength: n.MaxLength,
			Required: slices.Contains(root.Required, name), Key: n.Key, Value: v}
		if a.Title == "" {
			a.Title = name
		}
		if a.Type == "" {
			a.Type = JSONTypeOf(v)
			if a.Type == "null" {
				a.Type = ""
			}
		}
		if a.Display == DisplayCurrency {
			a.Currency = currencyOf(n.Currency, values)
		}
		for _, e := range n.Enum {
			a.Enum = append(a.Enum, EnumValue{Value: e, Text: plainText(e)})
		}
		a.Text = a.format()
		out = append(out, a)
	}
	return out
}

// currencyOf returns the ISO code a currency amount is in: kw names it,
// or the argument holding it; without kw, the argument "currency" does.
func currencyOf(kw string, values map[string]json.RawMessage) string {
	from := "currency"
	if kw != "" {
		if _, ok := values[kw]; !ok {
			if isCurrencyCode(kw) {
				return kw
			}
			return ""
		}
		from = kw
	}
	var code string
	if json.Unmarshal(values[from], &code) == nil && isCurrencyCode(strings.ToUpper(code)) {
		return strings.ToUpper(code)
	}
	return ""
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// format says the argument's value for a person.
func (a Arg) format() string {
	switch JSONTypeOf(a.Value) {
	case JSONNumber:
		if a.Display == DisplayCurrency {
			if f, err := strconv.ParseFloat(strings.TrimSpace(string(a.Value)), 64); err == nil {
				return FormatMoney(f, a.Currency)
			}
		}
	case JSONString:
		if a.Display == DisplayDateTime {
			var s string
			_ = json.Unmarshal(a.Value, &s)
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return t.UTC().Format("2006-01-02 15:04 UTC")
			}
		}
	}
	return plainText(a.Value)
}

// plainText is a JSON value for a person: a string as it is, true and
// false as yes and no, other JSON compacted.
func plainText(raw json.RawMessage) string {
	switch JSONTypeOf(raw) {
	case JSONString:
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case JSONBoolean:
		if bytes.Equal(bytes.TrimSpace(raw), []byte("true")) {
			return "yes"
		}
		return "no"
	}
	return compactJSON(raw)
}

// currencySymbols are the symbols of the currencies shown with one; any
// other is shown with its code ("CHF 1,250.00").
var currencySymbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹", "KRW": "₩"}

// currencyDecimals are the currencies of other than two minor digits
// (ISO 4217).
var currencyDecimals = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// FormatMoney writes an amount of money in currency (an ISO 4217 code,
// or "" when unknown) with its symbol or code, its minor digits and
// thousands separated: "$4,800.00", "CHF 1,250.00", "¥1,200".
func FormatMoney(amount float64, currency string) string {
	dec, ok := currencyDecimals[currency]
	if !ok {
		dec = 2
	}
	sign := ""
	if amount < 0 || math.Signbit(amount) && amount != 0 {
		sign, amount = "-", -amount
	}
	num := strconv.FormatFloat(amount, 'f', dec, 64)
	whole, frac, _ := strings.Cut(num, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	switch sym, ok := currencySymbols[currency]; {
	case ok:
		return sign + sym + b.String()
	case currency != "":
		return sign + currency + " " + b.String()
	}
	return sign + b.String()
}

// KeyArg is an argument as a row of the queue shows it.
type KeyArg struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// maxKeyArgs and maxKeyText bound what a pending index entry holds.
const (
	maxKeyArgs = 4
	maxKeyText = 80
)

// KeyArgs returns the arguments a row of the queue shows, formatted:
// those the schema marks key (x-interlock-key: true), or else the first
// three strings, numbers or booleans (in the schema's order), leaving out
// an argument that only names the currency of another. At most four,
// each cut to 80 bytes.
func KeyArgs(args, schema json.RawMessage) []KeyArg {
	all := Args(args, schema)
	var marked []Arg
	for _, a := range all {
		if a.Key {
			marked = append(marked, a)
		}
	}
	limit := maxKeyArgs
	if len(marked) == 0 {
		limit = 3
		var root schemaNode
		_ = json.Unmarshal(schema, &root)
		props := map[string]json.RawMessage{}
		_ = json.Unmarshal(root.Properties, &props)
		currencies := map[string]bool{}
		for _, a := range all {
			if a.Display == DisplayCurrency {
				var n schemaNode
				_ = json.Unmarshal(props[a.Name], &n)
				currencies[cmpOr(n.Currency, "currency")] = true
			}
		}
		for _, a := range all {
			switch JSONTypeOf(a.Value) {
			case JSONString, JSONNumber, JSONBoolean:
				if !currencies[a.Name] {
					marked = append(marked, a)
				}
			}
		}
	}
	var out []KeyArg
	for _, a := range marked {
		if len(out) == limit {
			break
		}
		out = append(out, KeyArg{Name: a.Name, Title: Truncate(a.Title, maxKeyText), Text: Truncate(a.Text, maxKeyText)})
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// objectKeys returns the keys of a JSON object in the order written.
func objectKeys(obj json.RawMessage) []string {
	if len(obj) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// SameJSON reports whether two JSON values are equal as values (4800 and
// 4800.0 are, "a" and "b" are not): whether a form's field changed an
// argument.
func SameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return jsonEqual(x, y)
}

func jsonEqual(x, y any) bool {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k, v := range xv {
			w, ok := yv[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !jsonEqual(xv[i], yv[i]) {
				return false
			}
		}
		return true
	}
	return x == y
}

// ArgsDigest returns the digest that binds a decision to a tool call's
// args: the hex SHA-256 of their RFC 8785 canonical JSON (JCS: keys
// sorted, no space, numbers as JavaScript writes them, strings escaped
// minimally), so that any language computes the same digest for the same
// args however they were written. Nil args are the empty object.
func ArgsDigest(args map[string]json.RawMessage) (string, error) {
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("protocol: args: %w", err)
	}
	return RawArgsDigest(raw)
}

// RawArgsDigest is [ArgsDigest] of args given as JSON: an object, or
// nothing (the empty object).
func RawArgsDigest(args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	if JSONTypeOf(args) != JSONObject {
		return "", errors.New("protocol: args are not a JSON object")
	}
	canonical, err := jcs.Transform(args)
	if err != nil {
		return "", fmt.Errorf("protocol: args: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}
