// The Widget plugin in AssemblyScript on the Extism ABI, built with the
// Extism AssemblyScript kit (@extism/as-pdk) and assembly/setpoint.ts: the
// logic of examples/widget/operator. For each Widget it desires one
// WidgetProvision (same name and namespace) carrying the widget's size and
// capacity, and reports status.state (Provisioning until the observed
// provision matches, then Ready), status.capacity and
// status.lastProvisioned; on deletion it records a Deprovisioned event with
// the capacity given back. `make plugins` builds it to
// bin/wasm/widget-as.wasm (npm ci, then npx asc assembly/index.ts --config
// asconfig.json).
import { hostCall, host_log, input, Json, nowRFC3339, output } from "./setpoint";

const CHILD_KEY = "WidgetProvision.example.setpoint.dev";

// setpoint_abi_version declares the ABI version the plugin speaks.
export function setpoint_abi_version(): i32 {
  return 1;
}

function capacityOf(size: Json): i64 {
  if (size.isStr("small")) return 1;
  if (size.isStr("medium")) return 4;
  if (size.isStr("large")) return 16;
  return 0;
}

function respond(s: string): i32 {
  output(Uint8Array.wrap(String.UTF8.encode(s)));
  return 0;
}

export function reconcile(): i32 {
  const req = Json.of(input());
  const obj = req.get("object");
  const meta = obj.get("metadata");
  const spec = obj.get("spec");
  const status = obj.get("status");
  const name = meta.get("name");
  const size = spec.get("size");
  const capacity = capacityOf(size);
  if (capacity == 0) {
    // A terminal error: not retried until the widget changes.
    return respond('{"error":"spec.size must be small, medium or large, not ' + size.body() + '","terminal":true}');
  }

  let ready = false;
  const children = req.get("children").get(CHILD_KEY).members();
  while (children.next()) {
    const c = children.value;
    const cs = c.get("spec");
    if (c.get("metadata").get("name").same(name) && cs.get("size").same(size) && cs.get("capacity").int() == capacity) {
      ready = true;
    }
  }
  let prev = status.get("capacity").int();
  let last = status.get("lastProvisioned").missing() ? "" : status.get("lastProvisioned").raw();
  if (ready && (last == "" || prev != capacity)) {
    last = '"' + nowRFC3339() + '"';
    prev = capacity;
    if (req.get("config").get("log").isStr("true")) {
      hostCall(host_log, '{"level":"info","message":"widget provisioned"}');
    }
  }

  let st = '{"state":"' + (ready ? "Ready" : "Provisioning") + '","provision":' + name.raw();
  if (prev != 0) st += ',"capacity":' + prev.toString();
  if (last != "") st += ',"lastProvisioned":' + last;
  st += "}";
  const child = '{"apiVersion":"example.setpoint.dev/v1","kind":"WidgetProvision","metadata":{"name":' + name.raw() +
    ',"namespace":' + meta.get("namespace").raw() + ',"labels":{"example.setpoint.dev/widget":' + name.raw() +
    '}},"spec":{"widget":' + spec.get("name").raw() + ',"size":' + size.raw() + ',"capacity":' + capacity.toString() + "}}";
  return respond('{"status":' + st + ',"children":[' + child + "]}");
}

export function finalize(): i32 {
  const req = Json.of(input());
  const name = req.get("object").get("metadata").get("name");
  let released: i64 = 0;
  const children = req.get("children").get(CHILD_KEY).members();
  while (children.next()) released += children.value.get("spec").get("capacity").int();
  return respond('{"done":true,"events":[{"type":"Normal","reason":"Deprovisioned","message":"widget ' + name.body() +
    " released " + released.toString() + ' capacity units"}]}');
}
