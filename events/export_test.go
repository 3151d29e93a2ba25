package events

// EncodeSDK encodes a valid event through sdk-go's marshaller, as Encode
// did before it wrote events directly: the tests hold Encode to its bytes.
var EncodeSDK = encodeSDK
