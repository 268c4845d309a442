package session

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
)

// A message delivered undecrypted carries its encryption context, which its producer writes,
// in its frame: the charge covers what the session holds of it, the library's bytes and the
// frame that encodes them, however large the data keys are.
func TestDeliveryChargeCoversEncryptionContext(t *testing.T) {
	m := &broker.Message{Payload: []byte("x"), Encryption: &broker.Encryption{
		Keys: map[string]broker.EncryptionKey{
			"key-1": {Value: bytes.Repeat([]byte{1}, 3<<20), Metadata: map[string]string{"version": "1"}},
			"key-2": {Value: bytes.Repeat([]byte{2}, 1<<10)},
		},
		Param:     bytes.Repeat([]byte{3}, 64<<10),
		Algorithm: "RSA",
	}}
	frame := wsapi.ConsumerMessage{MessageID: "CAEQAQ==", Payload: m.Payload, EncryptionContext: toWireEncryption(m.Encryption)}.Encode()
	held := int64(len(frame) + len(m.Payload) + len(m.Encryption.Param))
	for _, k := range m.Encryption.Keys {
		held += int64(len(k.Value))
	}
	if charge := DeliveryCharge(m); charge < held {
		t.Errorf("a message whose encryption context holds %d bytes, its frame included, is charged %d", held, charge)
	}
}
