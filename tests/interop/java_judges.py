"""What the Java-judged tests of Hudi's formats share, built once per run: the Java helper classes they call in
the reference JVMs (compiled in one javac run), and a typed table Java Hudi 0.15 wrote.

- `judge_classes`: Java helper classes that loop over what a test judges, so that it makes one py4j call a file
  or block instead of several a record: the HFile judges (test_java_hfile: HBase 2.4's reader and writer as Hudi
  0.15 shades them, Hudi's native reader, Hudi 1.2's native writer; the native reader's cells serve
  test_java_mdt_records too), the bloom filter judge (test_java_bloom) and the log judge (test_java_hudi_log:
  Hudi's log reader, and the records of the blocks its log writer writes). One javac run against Hudi 1.2's
  bundle, then 0.15's (its shaded HBase is found only there), then pyspark's Hadoop, Avro and Kryo: the helpers
  call what the two bundles declare alike, and what differs through reflection, so each JVM loads them against
  its own bundle. Long answers come back as files (`answer` in PACK).
- `java_typed_table`: a table whose columns have every type Hudi wraps in its column statistics (test_java_mdt_
  records), in partitions with nested and non-ASCII names, whose data files carry both bloom filter types
  (test_java_bloom): an insert (DYNAMIC_V0 filters, small rows: each file's filter grows to its bound of rows,
  then adds keys round-robin), a compaction of the metadata table right after it, then an upsert of two of its
  three partitions with SIMPLE filters whose clean deletes the files it replaced (tombstones in every metadata
  partition). What the shared `java_mdt_table` (tests/hudi_reference/java_mdt.py) lacks: its columns are
  strings, doubles and integers only, its partitions plain, its filters DYNAMIC_V0 of one row.

The test files that use these fixtures name this module in `pytest_plugins`: registered once as a plugin, each
session fixture is made once per run (imported into two test modules, it would be made once per module). Those
files import its constants first, so pytest is told not to rewrite it (it asserts nothing): PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

# -- Java helper classes, called in the reference JVMs

# Python run in the reference JVM's py4j client (`ref.jvm`): `judge_instance(classes, name)` is one instance
# of judge class `name` compiled into folder `classes`, made once per JVM and kept on the Spark session.
JUDGE_LOADER = """
def judge_instance(classes, name):
    judges = getattr(spark, "_tandem_judges", None)
    if judges is None:
        judges = spark._tandem_judges = {}
    if (classes, name) not in judges:
        gateway = spark.sparkContext._gateway
        urls = gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(classes).toURI().toURL()
        loader = jvm.java.net.URLClassLoader(urls, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        no_types = gateway.new_array(jvm.java.lang.Class, 0)
        no_values = gateway.new_array(jvm.java.lang.Object, 0)
        judges[(classes, name)] = loader.loadClass(name).getDeclaredConstructor(no_types).newInstance(no_values)
    return judges[(classes, name)]
"""

PACK = """
  static List<byte[]> unpack(byte[] blob) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(blob));
    List<byte[]> parts = new ArrayList<>();
    for (int n = in.readInt(); n > 0; n--) {
      int size = in.readInt();
      byte[] part = size < 0 ? null : new byte[size];
      if (part != null) in.readFully(part);
      parts.add(part);
    }
    return parts;
  }

  static byte[] pack(List<byte[]> parts) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeInt(parts.size());
    for (byte[] part : parts) {
      out.writeInt(part == null ? -1 : part.length);
      if (part != null) out.write(part);
    }
    return bytes.toByteArray();
  }

  static byte[] text(Object value) {
    return String.valueOf(value).getBytes(StandardCharsets.UTF_8);
  }

  // An answer goes back as a file, its path the reply: py4j hands a byte[] over one byte at a time, and a reply
  // longer than 8 KB waits ~40 ms for the caller's delayed acknowledgement. The caller reads it, then deletes it.
  static String answer(List<byte[]> parts) throws IOException {
    File file = File.createTempFile("tandem-judge-", ".answer");
    try (FileOutputStream out = new FileOutputStream(file)) {
      out.write(pack(parts));
    }
    return file.getPath();
  }
"""

# Hudi 0.15's write path (HoodieAvroHFileWriter): HBase's HFile writer with Hudi's comparator; its reader.
HBASE_JUDGE = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.Writable;
import org.apache.hudi.io.storage.HoodieHBaseKVComparator;
import org.apache.hudi.org.apache.hadoop.hbase.Cell;
import org.apache.hudi.org.apache.hadoop.hbase.CellUtil;
import org.apache.hudi.org.apache.hadoop.hbase.KeyValue;
import org.apache.hudi.org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hudi.org.apache.hadoop.hbase.io.hfile.*;
import org.apache.hudi.org.apache.hadoop.hbase.nio.ByteBuff;

public class TandemHBaseJudge {
PACK
  // Hadoop's defaults, read once (a new Configuration parses its XML resources again)
  private final Configuration defaults = new Configuration();

  public String read(String file, byte[] probes, byte[] metaNames) throws IOException {
    Configuration conf = defaults;
    Path path = new Path(file);
    List<byte[]> out = new ArrayList<>();
    try (HFile.Reader reader = HFile.createReader(path.getFileSystem(conf), path, new CacheConfig(conf), true, conf)) {
      out.add(text(reader.getEntries()));
      out.add(text(reader.getTrailer().getNumDataIndexLevels()));
      HFileScanner scanner = reader.getScanner(false, true);
      List<byte[]> cells = new ArrayList<>();
      if (scanner.seekTo()) {
        do {
          Cell cell = scanner.getCell();
          cells.add(CellUtil.cloneRow(cell));
          cells.add(CellUtil.cloneValue(cell));
        } while (scanner.next());
      }
      out.add(pack(cells));
      List<byte[]> found = new ArrayList<>();
      for (byte[] probe : unpack(probes)) {
        boolean hit = scanner.seekTo(new KeyValue(probe, null, null, null)) == 0;
        found.add(hit ? CellUtil.cloneValue(scanner.getCell()) : null);
      }
      out.add(pack(found));
      List<byte[]> info = new ArrayList<>();
      for (Map.Entry<byte[], byte[]> entry : reader.getHFileInfo().entrySet()) {
        info.add(entry.getKey());
        info.add(entry.getValue());
      }
      out.add(pack(info));
      List<byte[]> metas = new ArrayList<>();
      for (byte[] name : unpack(metaNames)) {
        HFileBlock meta = reader.getMetaBlock(new String(name, StandardCharsets.UTF_8), false);
        if (meta == null) {
          metas.add(null);
        } else {
          ByteBuff buffer = meta.getBufferWithoutHeader();
          byte[] bytes = new byte[buffer.remaining()];
          buffer.get(bytes);
          metas.add(bytes);
        }
      }
      out.add(pack(metas));
    }
    return answer(out);
  }

  public void write(String file, byte[] cells, byte[] info, byte[] metas, int blockSize, String codec, int chunk)
      throws IOException {
    Configuration conf = new Configuration(defaults);
    conf.setInt("hfile.index.block.max.size", chunk);
    Path path = new Path(file);
    HFileContext context = new HFileContextBuilder().withBlockSize(blockSize)
        .withCompression(Compression.Algorithm.valueOf(codec))
        .withCellComparator(new HoodieHBaseKVComparator()).build();
    HFile.Writer writer = HFile.getWriterFactory(conf, new CacheConfig(conf))
        .withPath(path.getFileSystem(conf), path).withFileContext(context).create();
    List<byte[]> pairs = unpack(info);
    for (int i = 0; i < pairs.size(); i += 2) writer.appendFileInfo(pairs.get(i), pairs.get(i + 1));
    pairs = unpack(cells);
    for (int i = 0; i < pairs.size(); i += 2) writer.append(new KeyValue(pairs.get(i), null, null, pairs.get(i + 1)));
    pairs = unpack(metas);
    for (int i = 0; i < pairs.size(); i += 2) {
      final byte[] content = pairs.get(i + 1);
      writer.appendMetaBlock(new String(pairs.get(i), StandardCharsets.UTF_8), new Writable() {
        public void write(DataOutput out) throws IOException { out.write(content); }
        public void readFields(DataInput in) { }
      });
    }
    writer.close();
  }
}
""".replace("PACK", PACK)

# Hudi's own reader (0.15: single-level indexes only; 1.x: any depth). It seeks forward only: sorted probes.
NATIVE_JUDGE = """
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;
import org.apache.hudi.common.util.Option;
import org.apache.hudi.io.SeekableDataInputStream;
import org.apache.hudi.io.hfile.HFileReader;
import org.apache.hudi.io.hfile.HFileReaderImpl;
import org.apache.hudi.io.hfile.KeyValue;
import org.apache.hudi.io.hfile.UTF8StringKey;

public class TandemNativeJudge {
PACK
  static final class Source extends InputStream {
    final byte[] data;
    int pos;
    Source(byte[] data) { this.data = data; }
    public int read() { return pos < data.length ? data[pos++] & 0xff : -1; }
    public int read(byte[] into, int off, int len) {
      if (pos >= data.length) return -1;
      int n = Math.min(len, data.length - pos);
      System.arraycopy(data, pos, into, off, n);
      pos += n;
      return n;
    }
    public int available() { return data.length - pos; }
  }

  static final class Stream extends SeekableDataInputStream {
    final Source source;
    Stream(Source source) { super(source); this.source = source; }
    public long getPos() { return source.pos; }
    public void seek(long pos) { source.pos = (int) pos; }
  }

  static HFileReader open(byte[] data) throws IOException {
    HFileReader reader = new HFileReaderImpl(new Stream(new Source(data)), data.length);
    reader.initializeMetadata();
    return reader;
  }

  static byte[] value(KeyValue kv) {
    return Arrays.copyOfRange(kv.getBytes(), kv.getValueOffset(), kv.getValueOffset() + kv.getValueLength());
  }

  public String read(String file, byte[] sortedProbes, byte[] infoKeys, byte[] metaNames) throws IOException {
    byte[] data = Files.readAllBytes(Paths.get(file));
    List<byte[]> out = new ArrayList<>();
    try (HFileReader reader = open(data)) {
      out.add(text(reader.getNumKeyValueEntries()));
      List<byte[]> cells = new ArrayList<>();
      if (reader.seekTo()) {
        do {
          KeyValue kv = reader.getKeyValue().get();
          int key = kv.getKeyContentOffset();
          cells.add(Arrays.copyOfRange(kv.getBytes(), key, key + kv.getKeyContentLength()));
          cells.add(value(kv));
        } while (reader.next());
      }
      out.add(pack(cells));
      List<byte[]> info = new ArrayList<>();
      for (byte[] key : unpack(infoKeys)) {
        Option<byte[]> found = reader.getMetaInfo(new UTF8StringKey(key));
        info.add(found.isPresent() ? found.get() : null);
      }
      out.add(pack(info));
      List<byte[]> metas = new ArrayList<>();
      for (byte[] name : unpack(metaNames)) {
        Option<ByteBuffer> found = reader.getMetaBlock(new String(name, StandardCharsets.UTF_8));
        if (found.isPresent()) {
          ByteBuffer buffer = found.get().duplicate();
          byte[] bytes = new byte[buffer.remaining()];
          buffer.get(bytes);
          metas.add(bytes);
        } else {
          metas.add(null);
        }
      }
      out.add(pack(metas));
    }
    List<byte[]> found = new ArrayList<>();
    try (HFileReader reader = open(data)) {
      boolean any = reader.seekTo();
      for (byte[] probe : unpack(sortedProbes)) {
        boolean hit = any && reader.seekTo(new UTF8StringKey(probe)) == HFileReader.SEEK_TO_FOUND;
        found.add(hit ? value(reader.getKeyValue().get()) : null);
      }
    }
    out.add(pack(found));
    return answer(out);
  }

  // The file info "schema" (or null) and the cells (key, value, ...) of the HFile at [offset, offset + length)
  // of a file: a base file, or the content of a log's HFile data block.
  public String cells(String file, long offset, int length) throws IOException {
    byte[] data = new byte[length];
    try (RandomAccessFile in = new RandomAccessFile(file, "r")) {
      in.seek(offset);
      in.readFully(data);
    }
    List<byte[]> cells = new ArrayList<>();
    byte[] schema;
    try (HFileReader reader = open(data)) {
      Option<byte[]> info = reader.getMetaInfo(new UTF8StringKey("schema"));
      schema = info.isPresent() ? info.get() : null;
      if (reader.seekTo()) {
        do {
          KeyValue kv = reader.getKeyValue().get();
          int key = kv.getKeyContentOffset();
          cells.add(Arrays.copyOfRange(kv.getBytes(), key, key + kv.getKeyContentLength()));
          cells.add(value(kv));
        } while (reader.next());
      }
    }
    return answer(Arrays.asList(schema, pack(cells)));
  }
}
""".replace("PACK", PACK)

# Hudi 1.2's native writer: string keys (UTF-8), single-level index.
NATIVE_WRITER = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.hudi.io.compress.CompressionCodec;
import org.apache.hudi.io.hfile.HFileContext;
import org.apache.hudi.io.hfile.HFileWriterImpl;

public class TandemNativeWriter {
PACK
  public void write(String file, byte[] cells, byte[] info, byte[] metas, int blockSize, String codec)
      throws IOException {
    HFileContext context = HFileContext.builder().blockSize(blockSize)
        .compressionCodec(CompressionCodec.valueOf(codec)).build();
    HFileWriterImpl writer = new HFileWriterImpl(context, new FileOutputStream(file));
    List<byte[]> pairs = unpack(cells);
    for (int i = 0; i < pairs.size(); i += 2) {
      writer.append(new String(pairs.get(i), StandardCharsets.UTF_8), pairs.get(i + 1));
    }
    pairs = unpack(info);
    for (int i = 0; i < pairs.size(); i += 2) {
      writer.appendFileInfo(new String(pairs.get(i), StandardCharsets.UTF_8), pairs.get(i + 1));
    }
    pairs = unpack(metas);
    for (int i = 0; i < pairs.size(); i += 2) {
      writer.appendMetaInfo(new String(pairs.get(i), StandardCharsets.UTF_8), pairs.get(i + 1));
    }
    writer.close();
  }
}
""".replace("PACK", PACK)

BLOOM_JUDGE = r"""
import java.io.File;
import java.io.FileOutputStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.apache.hudi.common.bloom.BloomFilter;
import org.apache.hudi.common.bloom.BloomFilterFactory;

public final class TandemBloomJudge {
  // One of the methods below, its answer left in a file (its path the reply; the caller deletes it): a py4j reply
  // longer than 8 KB waits ~40 ms for the caller's delayed acknowledgement, and filters run to hundreds of KB.
  public static String answer(String method, Class<?>[] types, Object[] values) throws Exception {
    String answer = (String) TandemBloomJudge.class.getMethod(method, types).invoke(null, values);
    File file = File.createTempFile("tandem-judge-", ".answer");
    try (FileOutputStream out = new FileOutputStream(file)) {
      out.write(answer.getBytes(StandardCharsets.UTF_8));
    }
    return file.getPath();
  }

  private static String[] keys(String packed) {
    if (packed.isEmpty()) {
      return new String[0];
    }
    String[] parts = packed.split(",", -1);
    String[] out = new String[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = new String(Base64.getDecoder().decode(parts[i]), StandardCharsets.UTF_8);
    }
    return out;
  }

  private static String answers(BloomFilter filter, String packed) {
    StringBuilder out = new StringBuilder();
    for (String key : keys(packed)) {
      out.append(filter.mightContain(key) ? '1' : '0');
    }
    return out.toString();
  }

  public static String build(String type, int numEntries, double fpp, int maxEntries, String keys) {
    BloomFilter filter = BloomFilterFactory.createBloomFilter(numEntries, fpp, maxEntries, type);
    for (String key : keys(keys)) {
      filter.add(key);
    }
    return filter.serializeToString();
  }

  public static String extend(String type, String serialized, String keys) {
    BloomFilter filter = BloomFilterFactory.fromString(serialized, type);
    for (String key : keys(keys)) {
      filter.add(key);
    }
    return filter.serializeToString();
  }

  public static String contains(String type, String serialized, String keys) {
    return answers(BloomFilterFactory.fromString(serialized, type), keys);
  }

  // "entries:fpp,..." -> "bits:hashes,..." by BloomFilterUtils (package-private, so through reflection)
  public static String sizes(String pairs) throws Exception {
    Class<?> utils = Class.forName("org.apache.hudi.common.bloom.BloomFilterUtils");
    Method bits = utils.getDeclaredMethod("getBitSize", int.class, double.class);
    Method hashes = utils.getDeclaredMethod("getNumHashes", int.class, int.class);
    bits.setAccessible(true);
    hashes.setAccessible(true);
    StringBuilder out = new StringBuilder();
    for (String pair : pairs.split(",")) {
      String[] parts = pair.split(":");
      int entries = Integer.parseInt(parts[0]);
      int size = (Integer) bits.invoke(null, entries, Double.parseDouble(parts[1]));
      out.append(out.length() == 0 ? "" : ",").append(size).append(':').append(hashes.invoke(null, size, entries));
    }
    return out.toString();
  }
}
"""


# Hudi's log reader (test_java_hudi_log): HoodieLogFormat.newReader over a file, each block's type, header and
# footer (as Hudi serializes them), where its content starts and where it ends, and its records: a command's
# type; a delete block's records as Hudi re-serializes them (else their keys and partitions); a data block's
# records (HoodieDataBlock.getRecordIterator) in Avro binary, back to back. The calls that differ between
# Hudi 0.15 and 1.x (newReader's schema type, header and footer bytes, a delete block's constructor, content
# bytes) go through reflection, so that one class serves both bundles. It catches whatever Java throws, errors
# too (a damaged length may ask for more memory than the JVM has), as the judge's py4j calls did before.
LOG_JUDGE = """
import java.io.*;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.IndexedRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.hadoop.conf.Configuration;
import org.apache.hudi.common.model.DeleteRecord;
import org.apache.hudi.common.model.HoodieAvroIndexedRecord;
import org.apache.hudi.common.model.HoodieKey;
import org.apache.hudi.common.model.HoodieLogFile;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.table.log.HoodieLogFormat;
import org.apache.hudi.common.table.log.block.HoodieCommandBlock;
import org.apache.hudi.common.table.log.block.HoodieDataBlock;
import org.apache.hudi.common.table.log.block.HoodieDeleteBlock;
import org.apache.hudi.common.table.log.block.HoodieLogBlock;
import org.apache.hudi.common.util.collection.ClosableIterator;
import org.apache.hudi.common.util.collection.Pair;
import org.apache.hudi.storage.HoodieStorage;
import org.apache.hudi.storage.HoodieStorageUtils;
import org.apache.hudi.storage.StoragePath;
import org.apache.hudi.storage.hadoop.HadoopStorageConfiguration;

public class TandemLogJudge {
PACK
  private final HadoopStorageConfiguration conf = new HadoopStorageConfiguration(new Configuration());

  static Method method(Class<?> owner, String name, int parameters) {
    for (Method m : owner.getMethods()) {
      if (m.getName().equals(name) && m.getParameterCount() == parameters) return m;
    }
    return null;
  }

  static final Method NEW_READER = method(HoodieLogFormat.class, "newReader", 3);
  static final Method LOG_METADATA = method(HoodieLogBlock.class, "getLogMetadataBytes", 1);  // 0.15
  static final Method HEADER =
      LOG_METADATA != null ? LOG_METADATA : method(HoodieLogBlock.class, "getHeaderMetadataBytes", 1);
  static final Method FOOTER =
      LOG_METADATA != null ? LOG_METADATA : method(HoodieLogBlock.class, "getFooterMetadataBytes", 1);
  static final Method CONTENT = method(HoodieLogBlock.class, "getContentBytes", 1);

  static Throwable cause(Throwable e) {
    return e instanceof InvocationTargetException && e.getCause() != null ? e.getCause() : e;
  }

  static String firstLine(Throwable e, int limit) {
    String text = String.valueOf(cause(e));
    text = text.split("\\n", 2)[0];
    return text.substring(0, Math.min(limit, text.length()));
  }

  static byte[] bytes(Object content) {
    if (content instanceof ByteArrayOutputStream) return ((ByteArrayOutputStream) content).toByteArray();
    return (byte[]) content;
  }

  // Java's own serialization of the delete records it read: Hudi 0.15's constructor, else 1.x's
  static byte[] deleteContent(DeleteRecord[] deletes, Map<?, ?> header) throws Exception {
    Object block;
    try {
      block = HoodieDeleteBlock.class.getConstructor(DeleteRecord[].class, Map.class).newInstance(deletes, header);
    } catch (NoSuchMethodException e) {
      List<Pair<DeleteRecord, Long>> pairs = new ArrayList<>();
      for (DeleteRecord record : deletes) pairs.add(Pair.of(record, null));
      block = HoodieDeleteBlock.class.getConstructor(List.class, Map.class).newInstance(pairs, header);
    }
    return bytes(CONTENT.invoke(block, new Object[] {null}));
  }

  // [tag, payload]: command -> its type; delete -> content bytes; keys -> key, partition, ...; data -> count, Avro
  static List<byte[]> records(HoodieLogBlock block, String kind) throws Exception {
    if (kind.equals("COMMAND_BLOCK")) {
      return Arrays.asList(text("command"), text(((HoodieCommandBlock) block).getType().name()));
    }
    if (kind.equals("DELETE_BLOCK")) {
      DeleteRecord[] deletes = ((HoodieDeleteBlock) block).getRecordsToDelete();
      try {
        return Arrays.asList(text("delete"), deleteContent(deletes, block.getLogBlockHeader()));
      } catch (Throwable e) {  // an ordering value Java unwrapped and cannot re-wrap: the keys it read
        List<byte[]> keys = new ArrayList<>();
        for (DeleteRecord record : deletes) {
          keys.add(record.getRecordKey() == null ? null : text(record.getRecordKey()));
          keys.add(record.getPartitionPath() == null ? null : text(record.getPartitionPath()));
        }
        return Arrays.asList(text("keys"), pack(keys));
      }
    }
    String schemaText = block.getLogBlockHeader().get(HoodieLogBlock.HeaderMetadataType.SCHEMA);
    Schema schema = new Schema.Parser().parse(schemaText);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
    GenericDatumWriter<IndexedRecord> writer = new GenericDatumWriter<>(schema);
    ClosableIterator<HoodieRecord<Object>> iterator =
        ((HoodieDataBlock) block).getRecordIterator(HoodieRecord.HoodieRecordType.AVRO);
    int count = 0;
    while (iterator.hasNext()) {
      writer.write((IndexedRecord) iterator.next().getData(), encoder);
      count++;
    }
    iterator.close();
    encoder.flush();
    return Arrays.asList(text("data"), pack(Arrays.asList(text(count), out.toByteArray())));
  }

  // kind, header bytes, footer bytes, content position, end, then [tag, payload] or ["error", message]
  static byte[] describe(HoodieLogBlock block, boolean withRecords) throws Exception {
    String kind = block.getBlockType().name();
    List<byte[]> out = new ArrayList<>();
    out.add(text(kind));
    out.add((byte[]) HEADER.invoke(null, block.getLogBlockHeader()));
    out.add((byte[]) FOOTER.invoke(null, block.getLogBlockFooter()));
    HoodieLogBlock.HoodieLogBlockContentLocation location = block.getBlockContentLocation().get();
    out.add(text(location.getContentPositionInLogFile()));
    out.add(text(location.getBlockEndPos()));
    if (!kind.equals("CORRUPT_BLOCK") && withRecords) {
      try {
        out.addAll(records(block, kind));
      } catch (Throwable e) {
        out.add(text("error"));
        out.add(text(firstLine(e, 200)));
      }
    }
    return pack(out);
  }

  // [error or null, blocks]: the blocks Java read, and the exception that stopped it, if one did
  public String read(String path, boolean withRecords) throws Exception {
    HoodieStorage storage = HoodieStorageUtils.getStorage(path, conf);
    HoodieLogFile file = new HoodieLogFile(new StoragePath(path));
    HoodieLogFormat.Reader reader = (HoodieLogFormat.Reader) NEW_READER.invoke(null, storage, file, null);
    List<byte[]> blocks = new ArrayList<>();
    String error = null;
    try {
      while (reader.hasNext()) blocks.add(describe(reader.next(), withRecords));
    } catch (Throwable e) {
      error = firstLine(e, 300);
    } finally {
      reader.close();
    }
    return answer(Arrays.asList(error == null ? null : text(error), pack(blocks)));
  }

  // -- what a block to write holds (the judge builds the blocks and writes them with HoodieLogFormatWriter)

  static String string(byte[] utf8) {
    return utf8 == null ? null : new String(utf8, StandardCharsets.UTF_8);
  }

  // DeleteRecord.create of each (key, partition, ordering type, ordering value), the ordering value boxed as
  // py4j boxes a Python value: Integer, Long, Double, Boolean or String (or null)
  public DeleteRecord[] deletes(byte[] packed) throws IOException {
    List<byte[]> parts = unpack(packed);
    DeleteRecord[] out = new DeleteRecord[parts.size() / 4];
    for (int i = 0; i < out.length; i++) {
      String type = string(parts.get(4 * i + 2));
      String value = string(parts.get(4 * i + 3));
      Comparable<?> ordering;
      switch (type) {
        case "none": ordering = null; break;
        case "bool": ordering = Boolean.valueOf(value); break;
        case "int": ordering = Integer.valueOf(value); break;
        case "long": ordering = Long.valueOf(value); break;
        case "double": ordering = Double.valueOf(value); break;
        case "string": ordering = value; break;
        default: throw new IllegalArgumentException(type);
      }
      out[i] = DeleteRecord.create(string(parts.get(4 * i)), string(parts.get(4 * i + 1)), ordering);
    }
    return out;
  }

  // Avro records, each decoded from its binary by the schema: HoodieAvroIndexedRecords of (binary)* or, keyed,
  // of (key, binary)* under HoodieKey(key, "")
  public List<HoodieRecord> records(byte[] packed, Schema schema, boolean keyed) throws IOException {
    List<byte[]> parts = unpack(packed);
    GenericDatumReader<IndexedRecord> reader = new GenericDatumReader<>(schema);
    List<HoodieRecord> out = new ArrayList<>();
    for (int i = 0; i < parts.size(); i += keyed ? 2 : 1) {
      byte[] binary = parts.get(keyed ? i + 1 : i);
      IndexedRecord record = reader.read(null, DecoderFactory.get().binaryDecoder(binary, null));
      out.add(keyed ? new HoodieAvroIndexedRecord(new HoodieKey(string(parts.get(i)), ""), record)
          : new HoodieAvroIndexedRecord(record));
    }
    return out;
  }
}
""".replace("PACK", PACK)


JUDGES = {
    "TandemHBaseJudge": HBASE_JUDGE,
    "TandemNativeJudge": NATIVE_JUDGE,
    "TandemNativeWriter": NATIVE_WRITER,
    "TandemBloomJudge": BLOOM_JUDGE,
    "TandemLogJudge": LOG_JUDGE,
}


def _spark_jars(reference) -> list[str]:
    """Hadoop's API (HBase's reader takes a FileSystem), Avro and Kryo (HoodieRecord's) come with its pyspark."""
    venv = Path(reference.spec["python"]).parent.parent
    jars = venv.glob("lib/python*/site-packages/pyspark/jars/*.jar")
    return sorted(str(jar) for jar in jars if jar.name.startswith(("hadoop-client-api-", "avro-1.", "kryo-shaded-")))


@pytest.fixture(scope="session")
def judge_classes(java_hudi, java_hudi_1x, tmp_path_factory) -> Path:
    """Every helper class, compiled in one javac run: against Hudi 1.2's signatures first (the native reader's
    and the bloom judge's, which Hudi 0.15 shares), then 0.15's bundle (the HBase judge's shaded HBase)."""
    javac = shutil.which("javac")
    if javac is None:
        if os.environ.get("CI"):
            raise RuntimeError("javac is needed to judge Hudi's formats with Java Hudi")
        pytest.skip("javac (a JDK) is needed to judge Hudi's formats with Java Hudi")
    out = tmp_path_factory.mktemp("java-judges")
    for name, source in JUDGES.items():
        (out / f"{name}.java").write_text(source)
    classpath = os.pathsep.join([java_hudi_1x.spec["jar"], java_hudi.spec["jar"], *_spark_jars(java_hudi)])
    files = [str(out / f"{name}.java") for name in JUDGES]
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(out), *files], check=True, timeout=180)
    return out


# -- the typed table

TYPED_TABLE = "typed"
TYPED_PARTITIONS = ["p0", "2024/01", "ü x"]
BLOOM_ENTRIES, BLOOM_MAX_ENTRIES = 2, 5  # a file's dynamic filter: rows of 2 keys while rows * 2 < 5, so 3 rows
TYPED_OPTIONS = {
    "hoodie.table.name": TYPED_TABLE,
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.metadata.index.column.stats.column.list": "ts,i8,f32,day,at,amount,blob,name",
    "hoodie.metadata.compact.max.delta.commits": "1",  # a compaction after the first delta commit
    "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",  # the upsert's clean deletes the files it replaced
    "hoodie.cleaner.fileversions.retained": "1",
    "hoodie.index.bloom.num_entries": str(BLOOM_ENTRIES),
    "hoodie.bloom.index.filter.dynamic.max.entries": str(BLOOM_MAX_ENTRIES),
    # no embedded timeline server (direct markers): the same files and metadata table, a second less per write
    "hoodie.embed.timeline.server": "false",
}
SIMPLE_OPTIONS = {**TYPED_OPTIONS, "hoodie.bloom.index.filter.type": "SIMPLE"}


def typed_rows(n: int) -> pa.Table:
    return pa.table(
        {
            "id": [f"k{i:03d}-{'é' if i % 2 else 'x'}" for i in range(n)],
            "part": [TYPED_PARTITIONS[i % 3] for i in range(n)],
            "ts": pa.array(range(n), pa.int64()),
            "i8": pa.array([i - 12 for i in range(n)], pa.int8()),
            "i32": pa.array([i * 100_000 for i in range(n)], pa.int32()),
            "f32": pa.array([i / 3 for i in range(n)], pa.float32()),
            "f64": pa.array([i / 7 for i in range(n)], pa.float64()),
            "flag": [i % 2 == 0 for i in range(n)],
            "day": pa.array([date(2020, 1, 1 + i) for i in range(n)], pa.date32()),
            "at": pa.array(
                [datetime(2020, 1, 1, 0, 0, i, tzinfo=timezone.utc) for i in range(n)], pa.timestamp("us", "UTC")
            ),
            "amount": pa.array([Decimal(i) / 8 for i in range(n)], pa.decimal128(12, 3)),
            "blob": [bytes([i, 255 - i]) for i in range(n)],
            "name": [None if i % 5 == 0 else f"n{i}" for i in range(n)],
        }
    )


@pytest.fixture(scope="session")
def java_typed_table(java_hudi, tmp_path_factory) -> Path:
    """The typed table (see above), written once per run; its users only read it."""
    path = tmp_path_factory.mktemp("java-typed") / TYPED_TABLE
    rows = typed_rows(24)
    java_hudi.write(str(path), rows, "insert", TYPED_OPTIONS, mode="overwrite")
    first = rows.slice(0, 9)
    java_hudi.write(str(path), first.filter(pc.not_equal(first["part"], TYPED_PARTITIONS[2])), "upsert", SIMPLE_OPTIONS)
    return path
