#include "core/data/synthetic_data.h"

#include "gtest/gtest.h"

namespace ddplab {
namespace {

SyntheticData::Options Small(int workers, v1::Data::Task task = v1::Data::RANDOM) {
  SyntheticData::Options o;
  o.batch_size = 4;
  o.image_size = 16;
  o.num_classes = 10;
  o.num_workers = workers;
  o.prefetch = 2;
  o.task = task;
  o.seed = 7;
  return o;
}

TEST(SyntheticDataTest, BatchesHaveTheirShapeAndLabelRange) {
  SyntheticData data(Small(2));
  for (int i = 0; i < 5; ++i) {
    Batch b = data.Next();
    EXPECT_EQ(b.images.sizes(), (std::vector<int64_t>{4, 3, 16, 16}));
    EXPECT_EQ(b.labels.sizes(), (std::vector<int64_t>{4}));
    EXPECT_GE(b.labels.min().item<int64_t>(), 0);
    EXPECT_LT(b.labels.max().item<int64_t>(), 10);
  }
}

// Workers generate in any order, but batch i is the same whatever the worker count.
TEST(SyntheticDataTest, WorkersGiveTheSameBatchesInOrder) {
  SyntheticData serial(Small(0));
  SyntheticData parallel(Small(3));
  for (int i = 0; i < 8; ++i) {
    Batch a = serial.Next();
    Batch b = parallel.Next();
    EXPECT_TRUE(at::equal(a.images, b.images)) << "batch " << i;
    EXPECT_TRUE(at::equal(a.labels, b.labels)) << "batch " << i;
  }
}

// A worker that fails (out of memory in the red team's case; here labels it cannot draw)
// fails the consumer's Next() with the error, once per call, and the workers stop: no
// std::terminate, no hang, and no LibTorch backtrace in the message.
TEST(SyntheticDataTest, AWorkersFailureIsNextsError) {
  SyntheticData::Options o = Small(2);
  o.num_classes = 0;
  SyntheticData data(o);
  for (int call = 0; call < 2; ++call) {
    try {
      data.Next();
      ADD_FAILURE() << "Next() returned a batch whose labels cannot be drawn";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("a data worker failed generating batch "), std::string::npos) << what;
      EXPECT_NE(what.find("random_"), std::string::npos) << what;
      EXPECT_EQ(what.find("frame #"), std::string::npos) << what;
    }
  }
}

TEST(SyntheticDataTest, RanksAndBatchesDiffer) {
  SyntheticData::Options other = Small(0);
  other.rank = 1;
  SyntheticData a(Small(0)), b(other);
  at::Tensor first = a.Next().images.clone();
  EXPECT_FALSE(at::equal(first, a.Next().images));
  EXPECT_FALSE(at::equal(first, b.Next().images));
}

TEST(SyntheticDataTest, RandomImagesAreStandardNormal) {
  SyntheticData::Options o = Small(1);
  o.batch_size = 64;
  o.image_size = 64;
  SyntheticData data(o);
  at::Tensor images = data.Next().images;
  EXPECT_NEAR(images.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(images.std().item<double>(), 1.0, 0.01);
}

// In the learnable task, images of one class share a pattern: the mean image of a class
// correlates with another sample of that class, not with other classes.
TEST(SyntheticDataTest, LearnableImagesDependOnTheirLabel) {
  SyntheticData::Options o = Small(0, v1::Data::LEARNABLE);
  o.batch_size = 256;
  o.num_classes = 2;
  SyntheticData data(o);
  Batch b = data.Next();
  at::Tensor flat = b.images.flatten(1);
  at::Tensor class0 = flat.index({b.labels == 0}).mean(0);
  at::Tensor class1 = flat.index({b.labels == 1}).mean(0);
  double same = (class0 * class0).sum().item<double>();
  double cross = (class0 * class1).sum().item<double>();
  EXPECT_GT(same, 2 * std::abs(cross));
}

}  // namespace
}  // namespace ddplab
