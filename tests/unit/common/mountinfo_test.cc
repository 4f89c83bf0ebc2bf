#include "hyperfleet/common/mountinfo.h"

#include <gtest/gtest.h>

namespace hf {
namespace {

// Lines as Linux 6.1 writes them, with optional fields and an escaped space.
constexpr char kText[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:9 - cgroup2 "
    "cgroup2 "
    "rw,nsdelegate\n"
    "31 22 0:27 / /sys/fs/cgroup/cpu,cpuacct rw master:3 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "40 22 8:1 /srv/a\\040b /var/lib/my\\040node\\134x rw - ext4 /dev/sda1 rw\n"
    "garbage line without the separator\n"
    "41 22 0:5 / /short rw -\n";

TEST(MountInfoTest, ParsesFieldsOptionalFieldsAndEscapes) {
  const std::vector<MountEntry> m = ParseMountInfo(kText);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].mount_point, "/");
  EXPECT_EQ(m[0].fs_type, "ext4");
  EXPECT_EQ(m[0].source, "/dev/sda1");
  EXPECT_EQ(m[0].options, "rw,relatime");
  EXPECT_EQ(m[1].fs_type, "cgroup2");
  EXPECT_EQ(m[1].super_options, "rw,nsdelegate");
  EXPECT_EQ(m[2].mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(m[2].super_options, "rw,cpu,cpuacct");
  EXPECT_EQ(m[3].root, "/srv/a b");
  EXPECT_EQ(m[3].mount_point, "/var/lib/my node\\x");
}

TEST(MountInfoTest, IsMountPointMatchesWholeDecodedPaths) {
  const std::vector<MountEntry> m = ParseMountInfo(kText);
  EXPECT_TRUE(IsMountPointIn(m, "/sys/fs/cgroup"));
  EXPECT_TRUE(IsMountPointIn(m, "/var/lib/my node\\x"));
  EXPECT_FALSE(IsMountPointIn(m, "/sys/fs"));
  EXPECT_FALSE(IsMountPointIn(m, "/short"));
}

TEST(MountInfoTest, ReadsThisProcesssTable) {
  StatusOr<std::vector<MountEntry>> m = ReadMountInfo();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(IsMountPointIn(*m, "/"));
  EXPECT_TRUE(IsMountPointIn(*m, "/proc"));
}

} // namespace
} // namespace hf
