"""Files where the tables go: Hadoop's FileSystem API in the driver's JVM, so that every URI Spark
can read or write (file:, hdfs:, s3a:, gs:, abfs:, ...) also takes the job's own small files
(quality.json, report.html, plots, CSV copies, the incremental run's checkpoint). Nothing is
written with Python file calls: with --out on a cluster filesystem, the driver's disk holds nothing.

Paths are qualified once, on the driver (`file:/abs/out` for a relative `out`), so executors
whose working directories differ all read and write the same place."""

import re

from fleetwire.host.analytics.landing import InputError

# The package that provides a scheme's filesystem class, when the classpath lacks it.
PROVIDERS = {
    "s3a": "the hadoop-aws package, e.g. --packages org.apache.hadoop:hadoop-aws:{hadoop}",
    "s3": "the hadoop-aws package and an s3a:// URI, e.g. --packages org.apache.hadoop:hadoop-aws:{hadoop}",
    "s3n": "the hadoop-aws package and an s3a:// URI, e.g. --packages org.apache.hadoop:hadoop-aws:{hadoop}",
    "gs": "the GCS connector, e.g. --packages com.google.cloud.bigdataoss:gcs-connector:hadoop3-2.2.26",
    "abfs": "the hadoop-azure package, e.g. --packages org.apache.hadoop:hadoop-azure:{hadoop}",
    "abfss": "the hadoop-azure package, e.g. --packages org.apache.hadoop:hadoop-azure:{hadoop}",
    "wasb": "the hadoop-azure package, e.g. --packages org.apache.hadoop:hadoop-azure:{hadoop}",
    "wasbs": "the hadoop-azure package, e.g. --packages org.apache.hadoop:hadoop-azure:{hadoop}",
}
GENERIC = "the JAR with a Hadoop FileSystem for it (--packages GROUP:ARTIFACT:VERSION or --jars)"


class SchemeError(InputError):
    """A URI whose scheme has no Hadoop filesystem class on Spark's classpath."""


def scheme(path):
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", path)
    return m.group(1).lower() if m and len(m.group(1)) > 1 else None  # "C:" is a drive, not a scheme


def is_local(path):
    return scheme(path) in (None, "file")


def local_path(path):
    """The local path of a plain path or a file: URI."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return path


class Storage:
    """The Hadoop filesystems of one SparkSession (its Hadoop configuration: credentials, endpoints)."""

    def __init__(self, spark):
        self.jvm = spark._jvm
        self.conf = spark._jsc.hadoopConfiguration()

    def _path(self, p):
        return self.jvm.org.apache.hadoop.fs.Path(p)

    def check(self, path, option):
        """Raise SchemeError at once if no filesystem class serves path's scheme."""
        s = scheme(path) or "file"
        try:
            self.jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(s, self.conf)
        except Exception:  # noqa: BLE001 - UnsupportedFileSystemException, or ClassNotFound wrapped
            hadoop = self.jvm.org.apache.hadoop.util.VersionInfo.getVersion()
            how = PROVIDERS.get(s, GENERIC).format(hadoop=hadoop)
            raise SchemeError(
                'no Hadoop filesystem for "%s" (%s %s) on Spark\'s classpath: add %s' % (s, option, path, how)
            ) from None

    def qualify(self, path, option="path"):
        """path as a full URI (scheme and, for a relative path, the driver's working directory)."""
        self.check(path, option)
        p = self._path(path)
        return p.getFileSystem(self.conf).makeQualified(p).toString()

    def exists(self, path):
        p = self._path(path)
        return p.getFileSystem(self.conf).exists(p)

    def is_dir(self, path):
        p = self._path(path)
        fs = p.getFileSystem(self.conf)
        return fs.exists(p) and fs.getFileStatus(p).isDirectory()

    def list_files(self, root):
        """[(uri, size)] of every file under root, recursively."""
        p = self._path(root)
        it = p.getFileSystem(self.conf).listFiles(p, True)
        out = []
        while it.hasNext():
            st = it.next()
            out.append((st.getPath().toString(), st.getLen()))
        return out

    def size(self, path):
        p = self._path(path)
        return p.getFileSystem(self.conf).getFileStatus(p).getLen()

    def listdir(self, path):
        """Names directly under a directory ([] when it does not exist)."""
        p = self._path(path)
        fs = p.getFileSystem(self.conf)
        if not fs.exists(p):
            return []
        return sorted(st.getPath().getName() for st in fs.listStatus(p))

    def read_bytes(self, path):
        p = self._path(path)
        stream = p.getFileSystem(self.conf).open(p)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def read_text(self, path):
        return self.read_bytes(path).decode("utf-8")

    def write_bytes(self, path, data):
        """Create or replace a file. Where rename is atomic (HDFS, local), write beside it and rename,
        so that a reader never sees half a file."""
        p = self._path(path)
        fs = p.getFileSystem(self.conf)
        tmp = self._path(path + ".tmp-fleetwire")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise OSError("could not rename %s to %s" % (tmp.toString(), path))

    def write_text(self, path, text):
        self.write_bytes(path, text.encode("utf-8"))

    def delete(self, path, recursive=True):
        p = self._path(path)
        return p.getFileSystem(self.conf).delete(p, recursive)

    def mkdirs(self, path):
        p = self._path(path)
        return p.getFileSystem(self.conf).mkdirs(p)


def join(base, *parts):
    return "/".join([base.rstrip("/")] + [x.strip("/") for x in parts])
