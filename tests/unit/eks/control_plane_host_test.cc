// Host-wide port reservations of control planes (control_plane_host.h): real files in a temp
// dir, as two data dirs' servers share them.
#include "eks/cp/control_plane_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "hyperfleet/common/fs.h"

namespace hf::eks::host {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class PortReservationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-ports-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    reservations_ = root_ + "/reservations";
    ASSERT_TRUE(MakeDirs(reservations_).ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  // A control plane directory of some data dir, with its plan file.
  std::string Plane(const std::string& data_dir, const std::string& name) {
    const std::string dir = root_ + "/" + data_dir + "/eks/" + name;
    EXPECT_TRUE(MakeDirs(dir).ok());
    EXPECT_TRUE(WriteFileAtomically(dir + "/control-plane.json", "{}\n").ok());
    return dir;
  }

  std::string root_, reservations_;
};

TEST_F(PortReservationsTest, PlanesOfTwoDataDirsSeeEachOthersPorts) {
  const std::string a = Plane("data-a", "train");
  const std::string b = Plane("data-b", "train");  // the same cluster name, another server
  ASSERT_TRUE(ReservePorts(reservations_, a, {26000, 26001, 26002}).ok());
  ASSERT_TRUE(ReservePorts(reservations_, b, {26003, 26004}).ok());
  EXPECT_THAT(ReservedPorts(reservations_), ElementsAre(26000, 26001, 26002, 26003, 26004));
  // Reserving again replaces that plane's record.
  ASSERT_TRUE(ReservePorts(reservations_, a, {26010}).ok());
  EXPECT_THAT(ReservedPorts(reservations_), ElementsAre(26003, 26004, 26010));
}

TEST_F(PortReservationsTest, APlaneThatIsGoneFreesItsPortsAndItsRecord) {
  const std::string a = Plane("data-a", "train");
  const std::string b = Plane("data-b", "other");
  ASSERT_TRUE(ReservePorts(reservations_, a, {26000}).ok());
  ASSERT_TRUE(ReservePorts(reservations_, b, {26001}).ok());
  fs::remove_all(a);  // removed, or a creation that failed and cleaned up
  EXPECT_THAT(ReservedPorts(reservations_), ElementsAre(26001));
  int records = 0;
  for (const auto& e : fs::directory_iterator(reservations_)) {
    if (e.path().filename().string().front() != '.') ++records;
  }
  EXPECT_EQ(records, 1);
}

TEST_F(PortReservationsTest, NoDirectoryOrGarbageReservesNothing) {
  EXPECT_THAT(ReservedPorts(root_ + "/absent"), IsEmpty());
  ASSERT_TRUE(WriteFileAtomically(reservations_ + "/garbage", "one line only").ok());
  EXPECT_THAT(ReservedPorts(reservations_), IsEmpty());
  EXPECT_FALSE(fs::exists(reservations_ + "/garbage"));
}

}  // namespace
}  // namespace hf::eks::host
