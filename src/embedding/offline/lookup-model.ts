/**
 * The offline model without onnxruntime. Its ONNX graph is one Gather of token rows from a table (and a Cast when the
 * table is fp16, model-files.ts), so adding those rows here adds the very floats onnxruntime would give: fp16 → fp32 is
 * exact. Measured at 100k tools, onnxruntime's session was about a third of embedding time (marshalling int64 inputs,
 * a [batch, tokens, 100] output) and held its own copy of the table; this reads the table once, as fp16, and sums the pooled tokens' rows from it.
 */
import { readFileSync } from 'node:fs';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';

/** The table of a lookup-only model: `rows` × `dims` values, fp16 bits or fp32. */
export interface LookupTable {
  rows: number;
  dims: number;
  values: Uint16Array | Float32Array;
  /**
   * 1 for each row that is all zeros: the offline model's special tokens, [UNK] among them, which every punctuation
   * mark becomes (47% of the tokens of a generated 20k-tool catalog). Adding such a row changes no sum, so addRow
   * skips it.
   */
  zeroRows: Uint8Array;
}

/** ONNX TensorProto.DataType values. */
const FLOAT = 1;
const FLOAT16 = 10;

interface OnnxNode {
  opType: string;
  input: string[];
  output: string[];
  attributes: { name: string; i: number }[];
}

interface OnnxTensor {
  name: string;
  dims: number[];
  dataType: number;
  raw?: Uint8Array;
}

/**
 * The table of `onnxFile` when its graph is exactly the offline model's (a Gather of `input_ids` from one initializer,
 * optionally cast to float), otherwise undefined: any other graph runs through onnxruntime as before. The file is read
 * with a protobuf wire reader for the few ONNX fields this needs (onnx.proto field numbers), so the installed package
 * carries no ONNX schema library: onnx-proto's protobufjs 6 was 22 MB of a global install.
 */
export function readLookupTable(onnxFile: string): LookupTable | undefined {
  const graph = onnxGraph(readFileSync(onnxFile));
  const [gather, cast, ...rest] = graph?.nodes ?? [];
  if (!graph || rest.length > 0 || gather?.opType !== 'Gather' || gather.input[1] !== 'input_ids') return undefined;
  if (cast && (cast.opType !== 'Cast' || cast.input[0] !== gather.output[0])) return undefined;
  if (gather.attributes.some((attribute) => attribute.name === 'axis' && attribute.i !== 0)) return undefined;
  const table = graph.initializers.find((initializer) => initializer.name === gather.input[0]);
  const [rows, dims] = table?.dims ?? [];
  const raw = table?.raw;
  if (!table || !rows || !dims || !raw || table.dims.length !== 2) return undefined;
  // Copied out of the file's buffer so it is aligned and the file's buffer can go.
  const bytes = new Uint8Array(raw.byteLength);
  bytes.set(raw);
  if (table.dataType === FLOAT16 && cast) return sized(rows, dims, new Uint16Array(bytes.buffer));
  if (table.dataType === FLOAT && !cast) return sized(rows, dims, new Float32Array(bytes.buffer));
  return undefined;
}

/** Calls `read` for each field of a message; a field it does not take (returns false) is skipped. */
function eachField(bytes: Uint8Array, read: (field: number, wire: WireType, reader: BinaryReader) => boolean): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (!read(field, wire, reader)) reader.skip(wire, field);
  }
}

const LEN = WireType.LengthDelimited;

/** ModelProto.graph (7): GraphProto.node (1) and .initializer (5). */
function onnxGraph(file: Uint8Array): { nodes: OnnxNode[]; initializers: OnnxTensor[] } | undefined {
  let graph: Uint8Array | undefined;
  eachField(file, (field, wire, reader) => field === 7 && wire === LEN && (graph = reader.bytes()) !== undefined);
  if (!graph) return undefined;
  const nodes: OnnxNode[] = [];
  const initializers: OnnxTensor[] = [];
  eachField(graph, (field, wire, reader) => {
    if (wire !== LEN || (field !== 1 && field !== 5)) return false;
    if (field === 1) nodes.push(onnxNode(reader.bytes()));
    else initializers.push(onnxTensor(reader.bytes()));
    return true;
  });
  return { nodes, initializers };
}

/** NodeProto: input (1), output (2), op_type (4), attribute (5: AttributeProto name (1), i (3)). */
function onnxNode(bytes: Uint8Array): OnnxNode {
  const node: OnnxNode = { opType: '', input: [], output: [], attributes: [] };
  eachField(bytes, (field, wire, reader) => {
    if (wire !== LEN) return false;
    if (field === 1) node.input.push(reader.string());
    else if (field === 2) node.output.push(reader.string());
    else if (field === 4) node.opType = reader.string();
    else if (field === 5) {
      const attribute = { name: '', i: 0 };
      eachField(reader.bytes(), (f, w, r) => {
        if (f === 1 && w === LEN) attribute.name = r.string();
        else if (f === 3 && w === WireType.Varint) attribute.i = Number(r.int64());
        else return false;
        return true;
      });
      node.attributes.push(attribute);
    } else return false;
    return true;
  });
  return node;
}

/** TensorProto: dims (1, packed or not), data_type (2), name (8), raw_data (9). */
function onnxTensor(bytes: Uint8Array): OnnxTensor {
  const tensor: OnnxTensor = { name: '', dims: [], dataType: 0 };
  eachField(bytes, (field, wire, reader) => {
    if (field === 1 && wire === WireType.Varint) tensor.dims.push(Number(reader.int64()));
    else if (field === 1 && wire === LEN) {
      const packed = new BinaryReader(reader.bytes());
      while (packed.pos < packed.len) tensor.dims.push(Number(packed.int64()));
    } else if (field === 2 && wire === WireType.Varint) tensor.dataType = reader.int32();
    else if (field === 8 && wire === LEN) tensor.name = reader.string();
    else if (field === 9 && wire === LEN) tensor.raw = reader.bytes();
    else return false;
    return true;
  });
  return tensor;
}

/** The table, if `values` holds exactly rows × dims values, with its zero rows marked. */
function sized(rows: number, dims: number, values: Uint16Array | Float32Array): LookupTable | undefined {
  if (values.length !== rows * dims) return undefined;
  // +0 and -0 alike: fp16 bits with only the sign bit, or floats equal to 0.
  const isZero = values instanceof Uint16Array ? (at: number) => (values[at]! & 0x7fff) === 0 : (at: number) => values[at] === 0;
  const zeroRows = new Uint8Array(rows);
  for (let row = 0; row < rows; row++) {
    let d = 0;
    while (d < dims && isZero(row * dims + d)) d++;
    if (d === dims) zeroRows[row] = 1;
  }
  return { rows, dims, values, zeroRows };
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
 * [batch, tokens, dims] output in between (the same floats, added in the same order). A zero row is skipped: x + 0 is x
 * for every x but -0, and a sum that starts at +0 never becomes -0 (a sum is -0 only when both addends are).
 */
export function addRow(table: LookupTable, id: number, sum: Float64Array): void {
  const { rows, dims, values } = table;
  if (!(id >= 0 && id < rows)) throw new Error(`token id ${id} is outside the embedding table (${rows} rows)`);
  if (table.zeroRows[id] === 1) return;
  const from = id * dims;
  if (values instanceof Float32Array) for (let d = 0; d < dims; d++) sum[d] = sum[d]! + values[from + d]!;
  else for (let d = 0; d < dims; d++) sum[d] = sum[d]! + HALF_TO_FLOAT[values[from + d]!]!;
}
