/**
 * The offline model without onnxruntime. Its ONNX graph is one Gather of token rows from a table (and a Cast when the
 * table is fp16, model-files.ts), so adding those rows here adds the very floats onnxruntime would give: fp16 → fp32 is
 * exact. Measured at 100k tools, onnxruntime's session was about a third of embedding time (marshalling int64 inputs,
 * a [batch, tokens, 100] output) and held its own copy of the table; this reads the table once, as fp16, and sums the pooled tokens' rows from it.
 */
import { readFileSync } from 'node:fs';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

/** The table of a lookup-only model: `rows` × `dims` values, fp16 bits or fp32. */
export interface LookupTable {
  rows: number;
  dims: number;
  values: Uint16Array | Float32Array;
}

/**
 * The table of `onnxFile` when its graph is exactly the offline model's (a Gather of `input_ids` from one initializer,
 * optionally cast to float), otherwise undefined: any other graph runs through onnxruntime as before.
 */
export function readLookupTable(onnxFile: string): LookupTable | undefined {
  const model = onnx.ModelProto.decode(readFileSync(onnxFile));
  const graph = model.graph;
  const [gather, cast, ...rest] = graph?.node ?? [];
  if (!graph || rest.length > 0 || gather?.opType !== 'Gather' || gather.input?.[1] !== 'input_ids') return undefined;
  if (cast && (cast.opType !== 'Cast' || cast.input?.[0] !== gather.output?.[0])) return undefined;
  if ((gather.attribute ?? []).some((attribute) => attribute.name === 'axis' && Number(attribute.i ?? 0) !== 0)) return undefined;
  const table = graph.initializer?.find((initializer) => initializer.name === gather.input?.[0]);
  const [rows, dims] = (table?.dims ?? []).map(Number);
  const raw = table?.rawData;
  if (!table || !rows || !dims || !raw || table.dims!.length !== 2) return undefined;
  // Copied out of the decoded file so it is aligned and the file's buffer can go.
  const bytes = new Uint8Array(raw.byteLength);
  bytes.set(raw);
  const { FLOAT, FLOAT16 } = onnx.TensorProto.DataType;
  if (table.dataType === FLOAT16 && cast) return sized({ rows, dims, values: new Uint16Array(bytes.buffer) });
  if (table.dataType === FLOAT && !cast) return sized({ rows, dims, values: new Float32Array(bytes.buffer) });
  return undefined;
}

function sized(table: LookupTable): LookupTable | undefined {
  return table.values.length === table.rows * table.dims ? table : undefined;
}

/** Every fp16 bit pattern as the float it is (exact in fp32), so a lookup converts with one index. */
const HALF_TO_FLOAT = (() => {
  const floats = new Float32Array(65_536);
  for (let bits = 0; bits < 65_536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    if (exponent === 0) floats[bits] = sign * mantissa * 2 ** -24;
    else if (exponent === 0x1f) floats[bits] = mantissa ? NaN : sign * Infinity;
    else floats[bits] = sign * (1024 + mantissa) * 2 ** (exponent - 25);
  }
  return floats;
})();

/**
 * Adds row `id` of the table to `sum`: what pooling over the model's output adds for a token with that id, without the
 * [batch, tokens, dims] output in between (the same floats, added in the same order).
 */
export function addRow(table: LookupTable, id: number, sum: Float64Array): void {
  const { rows, dims, values } = table;
  if (!(id >= 0 && id < rows)) throw new Error(`token id ${id} is outside the embedding table (${rows} rows)`);
  const from = id * dims;
  if (values instanceof Float32Array) for (let d = 0; d < dims; d++) sum[d] = sum[d]! + values[from + d]!;
  else for (let d = 0; d < dims; d++) sum[d] = sum[d]! + HALF_TO_FLOAT[values[from + d]!]!;
}
